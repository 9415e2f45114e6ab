"""The sandbox's spec-timings rows: measured from the named steps, OVER beyond the target, and
"not measured" when a step is missing or failed, never a failed sandbox."""

from __future__ import annotations

from nodeenv.scenario import StepResult
from nodeenv.scenarios import SCENARIOS, spec_times


def test_rows_add_the_steps_and_compare_with_the_targets() -> None:
    results = [
        StepResult("cni: ADD 3 pods in 2 namespaces via prismnet", True, 1.5),
        StepResult("fiberlb: LoadBalancer address in the Service", True, 6.0),
        StepResult("csi: create a 1 GiB volume", True, 0.5),
        StepResult("csi: publish to the node, stage and publish to a pod path", True, 0.25),
        StepResult("flashdns: the answer changes after the Service changes", False, 0.1),
    ]
    rows = {r.name.split(" (")[0]: r for r in spec_times.rows(results)}
    assert (
        rows["spec: pod network ready"].seconds == 0.5
        and "within 10 s" in rows["spec: pod network ready"].detail
    )
    assert "OVER 5 s" in rows["spec: LoadBalancer IP allocated"].detail
    assert rows["spec: PersistentVolume provisioned and mounted"].seconds == 0.75
    assert rows["spec: DNS record updated"].detail.startswith("not measured")
    assert all(r.ok for r in rows.values())


def test_every_requirement_names_steps_the_scenarios_have() -> None:
    import inspect

    sources = "".join(inspect.getsource(m) for m in SCENARIOS)
    for req in spec_times.REQUIREMENTS:
        for prefix in req.steps:
            head = prefix.replace("LoadBalancer", "{kind}")
            assert head in sources, f"no scenario step starts with {prefix!r}"
