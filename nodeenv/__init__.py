"""The embedded node environment: OVS + OVN (+ the suite's daemons) in a private run dir."""
