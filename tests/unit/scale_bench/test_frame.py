"""The scale bench's pure parts: growth exponents, the steepest metric, the table, the stepping."""

from __future__ import annotations

import math

from bench.scale.frame import Curve, over_target, run, sizes_within, slope, slopes, steepest, table


def test_slope_is_the_log_log_exponent() -> None:
    assert slope(100, 5, 1000, 5) == 0.0
    assert math.isclose(slope(100, 1, 1000, 10), 1.0)
    assert math.isclose(slope(100, 1, 1000, 100), 2.0)
    assert math.isclose(slope(10, 4, 100, 2), math.log(0.5) / math.log(10))


def test_slope_of_a_value_that_is_not_positive_is_nan() -> None:
    assert math.isnan(slope(100, 0, 1000, 5))
    assert math.isnan(slope(100, 1, 1000, float("nan")))
    assert math.isnan(slope(100, 1, 100, 2))


def test_slopes_between_consecutive_sizes_in_size_order() -> None:
    rows = {1000: {"a": 100.0, "b": 1.0}, 10: {"a": 1.0, "b": 1.0}, 100: {"a": 10.0}}
    grown = slopes(rows)
    assert [round(v, 6) for v in grown["a"]] == [1.0, 1.0]
    assert grown["b"][0] != grown["b"][0]  # b missing at 100: NaN both sides
    assert math.isnan(grown["b"][1])


def test_steepest_names_the_metric_and_honours_among() -> None:
    grown = {"flat": [0.1, 0.0], "steep": [0.9, 2.1], "gone": [float("nan")]}
    assert steepest(grown) == ("steep", 2.1)
    assert steepest(grown, ["flat"]) == ("flat", 0.1)
    name, value = steepest({"x": [float("nan")]})
    assert name == "" and math.isnan(value)


def test_table_prints_rows_slopes_and_the_verdict_on_ours() -> None:
    curve = Curve("svc", (10, 100), lambda ctx, n: {}, {"ctl MB": 1.2})
    text = table(curve, {10: {"ctl MB": 10.0, "ovn ms": 1.0}, 100: {"ctl MB": 200.0, "ovn ms": 10.0}})
    lines = text.splitlines()
    assert "ctl MB" in lines[0] and "ovn ms" in lines[0]
    assert lines[2].split("|")[0].strip() == "10" and "10.0" in lines[2]
    assert lines[3].split("|")[0].strip() == "100" and "200" in lines[3]
    assert "slope 10->100" in lines[4] and "1.30" in lines[4] and "1.00" in lines[4]
    assert lines[5] == "steepest: ctl MB 1.30; of ours: ctl MB 1.30 (over target: ctl MB 1.30 (> 1.2))"


def test_a_cost_per_object_is_held_to_its_own_target() -> None:
    curve = Curve("svc", (10, 100), lambda ctx, n: {}, {"ms/obj": 0.2, "MB": 1.2})
    grown = slopes({10: {"ms/obj": 1.0, "MB": 1.0}, 100: {"ms/obj": 1.0, "MB": 10.0}})
    assert over_target(curve, grown) == {}
    grown = slopes({10: {"ms/obj": 1.0, "MB": 1.0}, 100: {"ms/obj": 2.0, "MB": 10.0}})
    assert list(over_target(curve, grown)) == ["ms/obj"]
    assert "of ours: MB 1.00 (over target: ms/obj 0.30 (> 0.2))" in table(
        curve, {10: {"ms/obj": 1.0, "MB": 1.0}, 100: {"ms/obj": 2.0, "MB": 10.0}}
    )


def test_sizes_within_the_limit_and_run_steps_in_order() -> None:
    assert sizes_within((10_000, 100, 1000), 1000) == [100, 1000]
    seen: list[tuple[str, int]] = []

    def step(ctx: object, n: int) -> dict[str, float]:
        seen.append((str(ctx), n))
        return {"m": float(n)}

    printed: list[str] = []
    out = run("ctx", [Curve("a", (1, 10, 100), step), Curve("b", (5,), step)], 10, printed.append)
    assert seen == [("ctx", 1), ("ctx", 10), ("ctx", 5)]
    assert out == {"a": {1: {"m": 1.0}, 10: {"m": 10.0}}, "b": {5: {"m": 5.0}}}
    assert len(printed) == 3 and "steepest: m 1.00" in printed[1]
