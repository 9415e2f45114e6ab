"""Issue 29, "addresses conflicting after restarts", in the sandbox: a node's management switch deleted
from the NB under its running agent (as node-controller's release of a deleted Node, or an admin's
`ovn-nbctl ls-del`, does) comes back with its subnet and address; a pod whose delegated IPAM hands out
addresses of that subnet is refused (CNI code 102), and no switch overlapping it is created.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import cast

from cni.management import management_names
from nodeenv.cni_component import CniRuntime, installed_runtime
from nodeenv.daemons import run_checked, wait_for
from nodeenv.scenario import Scenario

NS = "sbx-overlap"
MGMT_PREFIX = management_names("")[0]


def run(scn: Scenario) -> None:
    env = scn.node.process_env()
    nbctl = ["ovn-nbctl", f"--db={env['OVN_NB_DB']}", "--timeout=10"]
    place = scn.at(0)

    def subnet(switch: str) -> str:
        get = [*nbctl, "--if-exists", "get", "Logical_Switch", switch, "other_config:subnet"]
        return run_checked(get, env).strip().strip('"')

    with scn.step("nb rows kept: a management switch deleted under its agent comes back", on=place.name) as r:
        names = run_checked([*nbctl, "--bare", "--columns=name", "list", "Logical_Switch"], env).split()
        switch = next((n for n in sorted(names) if n == f"{MGMT_PREFIX}{place.name}"),
                      next(n for n in sorted(names) if n.startswith(MGMT_PREFIX)))  # fmt: skip
        lsp = management_names(switch.removeprefix(MGMT_PREFIX))[1]

        def kept() -> tuple[str, str]:
            get = [*nbctl, "--if-exists", "get", "Logical_Switch_Port", lsp, "addresses"]
            return subnet(switch), run_checked(get, env).strip().strip('[]"')

        was = kept()
        started = time.monotonic()
        run_checked([*nbctl, "ls-del", switch], env)
        wait_for(lambda: "" not in kept(), f"{switch} and {lsp} written back by its agent", timeout=10)
        took, (now, port) = time.monotonic() - started, kept()
        if (now, port) != was:
            raise RuntimeError(f"{switch} came back with {now} {port}, had {was}")
        r.detail = f"{switch} {now} and {lsp} {port} back in {took:.2f} s"
    with scn.step("nb rows kept: a switch overlapping another's subnet is refused", on=place.name) as r:
        rt = installed_runtime(place.env, chained=False)
        data = Path(run_checked(["mktemp", "-d"]).strip())
        scn.defer(lambda: subprocess.run(["rm", "-rf", str(data)], check=False))
        plugin = {**cast(list[dict[str, object]], rt.conflist["plugins"])[0],
                  "ipam": {"type": "host-local", "subnet": now, "dataDir": str(data)}}  # fmt: skip
        overlapping = CniRuntime({**rt.conflist, "plugins": [plugin]}, rt.cni_path, rt.extra_env, rt.netns)
        run_checked(["ip", "netns", "add", NS])
        scn.defer(lambda: subprocess.run(["ip", "netns", "del", NS], check=False))
        call = overlapping.add("sbxoverlap" + "0" * 22, f"/run/netns/{NS}",
                               args=f"K8S_POD_NAMESPACE={NS};K8S_POD_NAME=p")  # fmt: skip
        if call.rc == 0 or call.out.get("code") != 102 or "overlaps" not in str(call.out.get("msg")):
            raise RuntimeError(f"ADD with {now} of {switch}: rc {call.rc} {call.out}")
        if subnet(f"k8s-{NS}") or f"k8s-{NS}" in run_checked([*nbctl, "--bare", "--columns=name", "list",
                                                               "Logical_Switch"], env).split():  # fmt: skip
            raise RuntimeError(f"k8s-{NS} was created")
        r.detail = f"code {call.out['code']}: {call.out['msg']}"
