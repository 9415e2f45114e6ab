"""The user workload `make bench BENCH=upgrade` keeps busy while the suite is rolled: echo servers on
node2 and node3 behind a ClusterIP and a LoadBalancer Service, a client pod on node1 (the probe runs
in its network namespace), a pod writing its PersistentVolume every second, and short-lived pods."""

from __future__ import annotations

NS = "upgrade-bench"
ECHO_PORT = 9000

ECHO = """import socket, threading
def serve(c):
    with c:
        while (b := c.recv(4096)):
            c.sendall(b)
s = socket.create_server(("", 9000), backlog=64)
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
"""
WRITER = """import os, time
with open("/data/ticks", "a") as f:
    while True:
        f.write(f"{time.time()}\\n"); f.flush(); os.fsync(f.fileno()); time.sleep(1)
"""


def objects(image: str) -> list[dict[str, object]]:
    def pod(name: str, node: str, command: list[str], **spec: object) -> dict[str, object]:
        labels = {"app": name.rsplit("-", 1)[0]}
        container = {"name": "main", "image": image, "command": command, **spec.pop("container", {})}  # type: ignore[dict-item]
        meta = {"name": name, "namespace": NS, "labels": labels}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "containers": [container],
                         "terminationGracePeriodSeconds": 1, **spec}}  # fmt: skip

    probe = {"readinessProbe": {"tcpSocket": {"port": ECHO_PORT}, "periodSeconds": 1}}
    ports = [{"port": ECHO_PORT, "targetPort": ECHO_PORT}]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        pod("echo-node2", "node2", ["python3", "-c", ECHO], container=probe),
        pod("echo-node3", "node3", ["python3", "-c", ECHO], container=probe),
        pod("client-node1", "node1", ["sleep", "infinity"]),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": NS},
         "spec": {"selector": {"app": "echo"}, "ports": ports}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo-lb", "namespace": NS},
         "spec": {"type": "LoadBalancer", "selector": {"app": "echo"}, "ports": ports}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "ticks", "namespace": NS},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "lightningstor-ssd",
                  "resources": {"requests": {"storage": "1Gi"}}}},
        pod("writer-node1", "node1", ["python3", "-c", WRITER],
            container={"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
            volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "ticks"}}]),
    ]  # fmt: skip


def churn_pod(image: str, name: str, node: str) -> dict[str, object]:
    """A short-lived pod (created and deleted through the run: its CNI ADD and DEL)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": "churn"}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": image, "command": ["sleep", "infinity"]}]},
            }  # fmt: skip
