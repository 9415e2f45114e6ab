"""FiberLB LoadBalancer controller: Services to load balancers (OVN or the FiberLB gRPC API)."""
