"""kubectl commands an admin runs against pods of the booted cluster through the kubelet API, for
the admin command-list test (tests/integration/kubelet/test_admin_kubectl.py) to join. `{ns}` is
a namespace holding pod `web` (containers `app` and `srv`, an HTTP server on 8080), `{tmp}` a
scratch directory; each must exit 0."""

KUBELET_API_COMMANDS: list[tuple[str, ...]] = [
    ("-n", "{ns}", "logs", "web", "-c", "app", "--tail", "5"),
    ("-n", "{ns}", "logs", "web", "-c", "app", "--since", "10s", "--timestamps"),
    ("-n", "{ns}", "exec", "web", "-c", "app", "--", "ls", "/"),
    ("-n", "{ns}", "cp", "web:/etc/hostname", "{tmp}/hostname", "-c", "app"),
    ("-n", "{ns}", "cp", "{tmp}/hostname", "web:/tmp/hostname", "-c", "app"),
    ("-n", "kube-system", "logs", "-l", "app.kubernetes.io/name=prismnet-agent", "--tail", "3", "--prefix"),
]
