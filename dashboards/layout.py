"""Shared building blocks of the sparkmirror dashboards: data source, variables, panels, grid.

Every panel queries the data source chosen in the ``datasource`` variable, so
the JSON imports into any Grafana with a Prometheus data source, whatever its
name or uid.
"""

from __future__ import annotations

import attr
from grafanalib import core as g

from dashboards import queries as q
from sparkmirror import metrics as m

#: Grafana's dashboard JSON model version the generated JSON declares (Grafana 12).
SCHEMA_VERSION = 41

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

SECONDS = "s"
RECORDS = "short"
RECORDS_PER_SECOND = "suffix: rec/s"

GREEN, YELLOW, ORANGE, RED, BLUE = "green", "yellow", "orange", "red", "blue"

#: Colour of each status, worst last, keyed by the status names in ``sparkmirror.metrics`` (PAUSED:
#: blue, a state someone chose, not a fault).
STATUS_COLOURS = {"OK": GREEN, "WARN": YELLOW, "PAUSED": BLUE, "STALL": ORANGE, "STOP": RED, "ERR": RED}
assert set(STATUS_COLOURS) == set(m.STATUSES), "a status without a colour"


def steps(*pairs: tuple[str, float | None]) -> list[dict]:
    """Threshold steps, e.g. ``steps((GREEN, None), (RED, 60))``."""
    return [{"color": colour, "value": value} for colour, value in pairs]


def status_mappings() -> list[dict]:
    """Value mapping: status code -> status name in the status colour."""
    options = {
        str(code): {"text": status, "color": STATUS_COLOURS[status], "index": code}
        for status, code in m.STATUS_CODES.items()
    }
    return [{"type": "value", "options": options}]


def status_thresholds() -> list[dict]:
    """Threshold steps colouring a status code like its status."""
    return steps(*((STATUS_COLOURS[s], None if code == 0 else code) for s, code in m.STATUS_CODES.items()))


def up_mappings(up: str = "UP", down: str = "DOWN") -> list[dict]:
    return [{"type": "value", "options": {
        "1": {"text": up, "color": GREEN, "index": 0},
        "0": {"text": down, "color": RED, "index": 1},
    }}]


def infinite_mapping(text: str) -> list[dict]:
    """Value mapping: +Inf (anything beyond a thousand years) shown as ``text``."""
    return [{"type": "range", "options": {"from": 3.2e10, "to": None, "result": {"text": text, "color": RED,
                                                                              "index": 0}}}]


def targets(queries: q.Query | list[q.Query]) -> list[g.Target]:
    items = queries if isinstance(queries, list) else [queries]
    return [
        g.Target(
            expr=item.expr, legendFormat=item.legend, refId=chr(ord("A") + i), datasource=DATASOURCE,
            instant=item.instant, format=g.TABLE_TARGET_FORMAT if item.instant else g.TIME_SERIES_TARGET_FORMAT,
        )
        for i, item in enumerate(items)
    ]


def stat(title: str, queries, description: str, unit: str = "none", thresholds=None, mappings=None,
         text_mode: str = "value", graph: bool = False) -> g.Stat:
    return g.Stat(
        title=title, description=description, dataSource=DATASOURCE, targets=targets(queries),
        format=unit, thresholds=thresholds or steps((GREEN, None)), mappings=mappings or [],
        colorMode="background", graphMode="area" if graph else "none", reduceCalc="lastNotNull",
        textMode=text_mode, noValue="no data",
    )


def timeseries(title: str, queries, description: str, unit: str, thresholds=None,
               legend_calcs: list[str] | None = None) -> g.TimeSeries:
    return g.TimeSeries(
        title=title, description=description, dataSource=DATASOURCE, targets=targets(queries), unit=unit,
        thresholds=thresholds or steps((GREEN, None)), thresholdsStyleMode="line" if thresholds else "off",
        legendDisplayMode="table" if legend_calcs else "list", legendCalcs=legend_calcs or [],
        tooltipMode="multi", tooltipSort="desc", spanNulls=True,
    )


def table(title: str, queries, description: str, unit: str, hide: tuple[str, ...] = (),
          mappings=None) -> g.Table:
    """Instant table: one row per series, its labels as columns, sorted by value."""
    excluded = {name: True for name in ("Time", "__name__", "job", "instance", *hide)}
    return g.Table(
        title=title, description=description, dataSource=DATASOURCE, targets=targets(queries), unit=unit,
        thresholds=steps((GREEN, None)), mappings=mappings or [], transformations=[{"id": "organize", "options": {"excludeByName": excluded}}],
        sortBy=[g.TableSortByField(displayName="Value", desc=True)], filterable=True,
        extraJson={"fieldConfig": {"defaults": {"mappings": mappings or []}}},
    )


def text(title: str, markdown: str, description: str) -> g.Text:
    return g.Text(title=title, content=markdown, mode="markdown", description=description)


class Grid:
    """Places panels left to right on Grafana's 24-column grid, wrapping to a new line."""

    WIDTH = 24

    def __init__(self) -> None:
        self.panels: list = []
        self.x = self.y = self.line_height = 0

    def row(self, title: str, repeat: str | None = None, description: str | None = None) -> None:
        self._newline()
        self.panels.append(g.RowPanel(
            title=title, description=description, gridPos=g.GridPos(h=1, w=self.WIDTH, x=0, y=self.y),
            repeat=g.Repeat(variable=repeat) if repeat else g.Repeat()))
        self.y += 1

    def add(self, panel, w: int, h: int) -> None:
        if self.x + w > self.WIDTH:
            self._newline()
        self.panels.append(_with_pos(panel, g.GridPos(h=h, w=w, x=self.x, y=self.y)))
        self.x += w
        self.line_height = max(self.line_height, h)

    def _newline(self) -> None:
        self.y += self.line_height
        self.x = self.line_height = 0


def _with_pos(panel, pos: g.GridPos):
    return attr.evolve(panel, gridPos=pos)


def datasource_variable() -> g.Template:
    return g.Template(name="datasource", label="Data source", query="prometheus", type="datasource",
                      default="default")


def query_variable(name: str, label: str) -> g.Template:
    """Multi-value variable from ``queries.variable_queries()``, "All" (``.*``) selected."""
    variable = g.Template(
        name=name, label=label, query=q.variable_queries()[name], dataSource=DATASOURCE, multi=True,
        includeAll=True, allValue=".*", default="$__all", refresh=g.REFRESH_ON_TIME_RANGE_CHANGE,
        sort=g.SORT_ALPHA_ASC,
    )
    variable._current = {"selected": True, "text": ["All"], "value": ["$__all"]}
    return variable


def topk_variable() -> g.Template:
    return g.Template(name="k", label="Top k", query="5,10,20,50", type="custom", default="10")


def dashboard(uid: str, title: str, description: str, grid: Grid, templates: list[g.Template],
              links: list[g.DashboardLink]) -> g.Dashboard:
    return g.Dashboard(
        uid=uid, title=title, description=description, tags=["sparkmirror", "kafka", "replication"],
        panels=grid.panels, templating=g.Templating(list=templates), schemaVersion=SCHEMA_VERSION,
        timezone="browser", refresh="30s", time=g.Time("now-1h", "now"), links=links,
        graphTooltip=g.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR, editable=True,
    ).auto_panel_ids()
