"""The runner's kubelet API (HTTPS on the node's address, port 10250): container logs, exec,
attach and port-forward for the API server's pods/log, pods/exec, pods/attach, pods/portforward,
and /metrics/resource for its metrics-server (kubectl top)."""
