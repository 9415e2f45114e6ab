"""catalogue.py's dashboards as Grafana dashboard JSON, built with grafana-foundation-sdk (Grafana's
own builders, generated from Grafana's schema: the JSON is what Grafana's import takes). Every
panel queries the Prometheus data source the importer picks for the `datasource` variable."""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders import dashboard as gdash
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef, GridPos

from dashboards.catalogue import Dashboard, Panel

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
WIDTH, HEIGHT, PER_ROW = 8, 7, 3
"""Grafana's grid is 24 wide: three panels a row."""


def _panel(p: Panel, index: int) -> stat.Panel | timeseries.Panel:
    query = prometheus.Dataquery().expr(p.expr).ref_id("A").datasource(DATASOURCE)
    if p.legend:
        query = query.legend_format(p.legend)
    panel = stat.Panel() if p.kind == "stat" else timeseries.Panel()
    panel = panel.id(index + 1).title(p.title).unit(p.unit).datasource(DATASOURCE).with_target(query)
    panel = panel.grid_pos(_grid(index))
    return panel.description(p.description) if p.description else panel


def _grid(index: int) -> GridPos:
    return GridPos(x=(index % PER_ROW) * WIDTH, y=(index // PER_ROW) * HEIGHT, w=WIDTH, h=HEIGHT)


def build(d: Dashboard) -> dict[str, Any]:
    """The dashboard's JSON model, as Grafana's dashboard import takes it."""
    var = gdash.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
    b = (
        gdash.Dashboard(d.title).uid(d.uid).description(d.description).tags(["k8shost"])
        .time("now-1h", "now").refresh("30s").timezone("utc").editable().with_variable(var)
    )  # fmt: skip
    for i, p in enumerate(d.panels):
        b = b.with_panel(_panel(p, i))
    model: dict[str, Any] = json.loads(json.dumps(b.build(), cls=JSONEncoder))
    return model


def render(d: Dashboard) -> str:
    """The file's text: stable key order and indentation, so regeneration is byte-identical."""
    return json.dumps(build(d), indent=2, sort_keys=True) + "\n"
