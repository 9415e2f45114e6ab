"""FlashDNS: the service-discovery controller and its embedded authoritative DNS server."""
