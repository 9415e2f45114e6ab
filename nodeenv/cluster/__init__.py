"""Cluster mode of the node environment: N nodes, each a network namespace, over a Geneve underlay.

settings.py  ClusterSettings (the only reader of K8SHOST_* for a cluster)
underlay.py  the underlay namespace, its bridge and one veth per node; names and addresses
chassis.py   a node's OVS: vswitchd's br-phy on the underlay, br-int and ovn-controller
cluster.py   Cluster: the control plane (API double), OVN central, the nodes; up/down; cluster files
"""
