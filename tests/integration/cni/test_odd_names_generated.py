"""Generated names at the edge of what the CNI spec and Kubernetes allow, ADDed into a real netns
through the installed `prismnet` executable and DELeted again (Hypothesis).

The agent either wires the pod (and DEL removes everything) or answers a CNI error having
created nothing; never the internal-error code 999.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from tests.bad_input import edge_settings
from tests.integration.cni.conftest import Agent
from tests.integration.cni.test_bad_input_generated import _check_reply, footprint

DNS_LABEL = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
ODD_IDS = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.\-]{0,300}\Z") | st.sampled_from(
    ["a" * 64 + "\n", "x" * 400]
)
IFNAMES = st.from_regex(r"\A[A-Za-z0-9_.\-]{1,15}\Z") | st.text(
    st.characters(blacklist_categories=("Cs", "Zs", "Cc"), blacklist_characters="/:\0"),
    min_size=1,
    max_size=15,
)


@pytest.mark.ovn
@edge_settings(max_examples=20)
@given(
    namespace=DNS_LABEL,
    pod=st.from_regex(r"\A[a-z0-9]([-a-z0-9.]{0,250}[a-z0-9])?\Z"),
    cid=ODD_IDS,
    ifname=IFNAMES,
)
@example(namespace="0", pod="0", cid="x" * 400, ifname="0")  # was a 999: the veth's ifalias > 255 bytes
@example(namespace="0", pod="0", cid="0", ifname="é" * 15)  # 30 bytes: was code 100 "cannot create"
@example(namespace="0", pod="0", cid="0", ifname="%")  # a template to the kernel: was code 100
@example(namespace="0", pod="0", cid="0", ifname="eà")  # UTF-8 C3 A0: 0xA0 is space to the kernel
def test_accepted_odd_names_are_wired_and_unwired_completely(
    agent: Agent, namespace: str, pod: str, cid: str, ifname: str
) -> None:
    """Names at the edge of what the CNI spec and Kubernetes allow, in a real netns: either a
    result (and DEL removes everything) or a CNI error that created nothing."""
    netns = f"gen-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    before = footprint(agent)
    env = {
        "PATH": "/usr/bin:/bin",
        "CNI_CONTAINERID": cid,
        "CNI_IFNAME": ifname,
        "CNI_NETNS": f"/run/netns/{netns}",
        "CNI_ARGS": f"K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={pod}",
    }
    conf = json.dumps({**agent.conflist["plugins"][0], "name": "prismnet", "cniVersion": "1.0.0"}).encode()  # type: ignore[index]
    exe = agent.env["PRISMNET_CNI_BIN"]
    try:
        add = subprocess.run([exe], input=conf, env={**env, "CNI_COMMAND": "ADD"}, capture_output=True)
        _check_reply(add.returncode, add.stdout, add.stderr, agent)
        if add.returncode:  # a name the kernel cannot take is the caller's error, not the plugin's
            assert json.loads(add.stdout)["code"] in (4, 7), add.stdout
        event(
            "ADD wired"
            if add.returncode == 0
            else f"ADD refused: {json.loads(add.stdout)['code']} {json.loads(add.stdout)['msg'][:90]}"
        )
    finally:
        delete = subprocess.run([exe], input=conf, env={**env, "CNI_COMMAND": "DEL"}, capture_output=True)
        subprocess.run(["ip", "netns", "del", netns], check=True)
    _check_reply(delete.returncode, delete.stdout, delete.stderr, agent)
    if add.returncode == 0 or delete.returncode:  # a refused name is refused by DEL alike
        assert delete.returncode == 0 or delete.stdout == add.stdout, (add.stdout, delete.stdout)
    after = footprint(agent)
    created = {k: sorted(set(after[k]) - set(before[k])) for k in after if set(after[k]) - set(before[k])}
    created.pop("NB switches", None)  # a namespace's switch and its router port stay (as for any pod)
    created["NB ports"] = [p for p in created.get("NB ports", []) if p != f"k8s-{namespace}-rtr"]
    created = {k: v for k, v in created.items() if v}
    assert not created, f"ADD+DEL left behind: {created}"
