"""A small kubelet (plus the bits of kube-controller-manager and the scheduler it needs) for one
machine: it takes the workloads the API holds (DaemonSets, Deployments, StatefulSets), creates their
Pods as the controllers would, and starts each container with podman from the image store exactly
as its PodSpec says, runs its probes and writes the Pod's status back.

Modules: apiclient (JSON over HTTPS with a kubeconfig), controllers (workloads -> Pods, scheduling),
envvars (env and envFrom), volumes (a pod's volumes on disk), podman_args (a container -> `podman
run` arguments), probes (httpGet, tcpSocket, exec, grpc), status (PodStatus from what ran), runner
(the loop), notbooted (images neither built nor stood in for), endpoints (the EndpointSlice controller),
sidecars/ (the CSI sidecars' stand-ins, started in their containers' place), storage/ (the plugin
watcher, PV controller, volume binding, attach/detach and CSI volume mounts, snapshot-controller),
cli (`python -m nodeenv.kubelet`), boot (`make boot`/`make boot-down`: the API double, the overlay,
the LightningStor VolumeService and the runner).
"""
