//! The sweep's charts: SVG line charts of the CSV's figures against the
//! number of federated objects, one colour per member count, solid and
//! dashed lines for two figures of one chart, a cross for the sharded
//! row.

use super::table::Table;
use plotters::prelude::*;
use std::error::Error;
use std::path::Path;

const COLOURS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
];

#[derive(Clone, Copy, PartialEq)]
enum Style {
    Solid,
    Dashed,
    /// A point alone (the sharded row).
    Cross,
}

struct Line {
    label: String,
    points: Vec<(f64, f64)>,
    colour: RGBColor,
    style: Style,
}

/// What one chart draws: (measure, its label, its style) for each member
/// count, and the measure drawn for the sharded row, if any.
struct Chart<'a> {
    file: &'a str,
    title: &'a str,
    y: &'a str,
    measures: &'a [(&'a str, &'a str, Style)],
    sharded: Option<(&'a str, &'a str)>,
}

const CHARTS: [Chart; 6] = [
    Chart {
        file: "first-run.svg",
        title: "First run (one-shot) and the watch's initial sync",
        y: "wall time (s)",
        measures: &[
            ("first_run.wall_s", "one-shot first run", Style::Solid),
            ("watch.initial_sync_s", "watch initial sync", Style::Dashed),
        ],
        sharded: Some(("watch.initial_sync_s", "watch initial sync")),
    },
    Chart {
        file: "per-member-object.svg",
        title: "Time per member object (flat: linear in objects × members)",
        y: "ms per (object × member)",
        measures: &[
            (
                "first_run.ms_per_member_object",
                "one-shot first run",
                Style::Solid,
            ),
            (
                "watch.ms_per_member_object",
                "watch initial sync",
                Style::Dashed,
            ),
        ],
        sharded: Some(("watch.ms_per_member_object", "watch initial sync")),
    },
    Chart {
        file: "writes.svg",
        title: "First run: writes per object",
        y: "writes",
        measures: &[
            (
                "first_run.member_writes_per_object_member",
                "member writes / (object × member)",
                Style::Solid,
            ),
            (
                "first_run.host_writes_per_object",
                "host writes / object",
                Style::Dashed,
            ),
        ],
        sharded: None,
    },
    Chart {
        file: "no-op.svg",
        title: "No-op run (nothing to change)",
        y: "wall time (s)",
        measures: &[("noop.wall_s", "no-op run", Style::Solid)],
        sharded: None,
    },
    Chart {
        file: "watch-latency.svg",
        title: "Watch: change latency (host write → last member write)",
        y: "latency (s)",
        measures: &[
            ("watch.p99_s", "p99", Style::Solid),
            ("watch.p50_s", "p50", Style::Dashed),
        ],
        sharded: Some(("watch.p99_s", "p99")),
    },
    Chart {
        file: "watch-rss.svg",
        title: "Watch: memory (all shards' processes added up)",
        y: "RSS (MiB)",
        measures: &[
            ("watch.idle_rss_mib", "idle RSS", Style::Solid),
            ("watch.peak_rss_mib", "peak RSS", Style::Dashed),
        ],
        sharded: Some(("watch.idle_rss_mib", "idle RSS")),
    },
];

/// Draws every chart of `table` into `dir`; a chart with nothing measured
/// is left out.
pub fn all(table: &Table, dir: &Path) -> Result<(), Box<dyn Error>> {
    let members = table.members();
    for chart in &CHARTS {
        let mut lines = Vec::new();
        for (i, m) in members.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            for (measure, label, style) in chart.measures {
                lines.push(Line {
                    label: format!("{label}, {m} members"),
                    points: table.series(*m, 1, measure),
                    colour,
                    style: *style,
                });
            }
            if let Some((measure, label)) = chart.sharded {
                for (sm, shards) in table.sharded().into_iter().filter(|(sm, _)| sm == m) {
                    lines.push(Line {
                        label: format!("{label}, {sm} members, {shards} shards"),
                        points: table.series(sm, shards, measure),
                        colour,
                        style: Style::Cross,
                    });
                }
            }
        }
        lines.retain(|l| !l.points.is_empty());
        if !lines.is_empty() {
            draw(&dir.join(chart.file), chart, &lines)?;
        }
    }
    Ok(())
}

fn draw(path: &Path, chart: &Chart, lines: &[Line]) -> Result<(), Box<dyn Error>> {
    let all = || lines.iter().flat_map(|l| l.points.iter());
    let x_max = all().map(|p| p.0).fold(0.0, f64::max) * 1.05;
    let y_max = all().map(|p| p.1).fold(0.0, f64::max) * 1.15;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
        .caption(chart.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(0f64..x_max.max(1.0), 0f64..y_max.max(f64::EPSILON))?;
    c.configure_mesh()
        .x_desc("federated objects")
        .y_desc(chart.y)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()?;
    for l in lines {
        let stroke = l.colour.stroke_width(2);
        let colour = l.colour;
        match l.style {
            Style::Solid => c
                .draw_series(LineSeries::new(l.points.clone(), stroke))?
                .label(&l.label)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 24, y)], stroke)),
            Style::Dashed => c
                .draw_series(DashedLineSeries::new(l.points.clone(), 6, 4, stroke))?
                .label(&l.label)
                .legend(move |(x, y)| {
                    EmptyElement::at((x, y))
                        + PathElement::new([(0, 0), (9, 0)], stroke)
                        + PathElement::new([(15, 0), (24, 0)], stroke)
                }),
            Style::Cross => c
                .draw_series(l.points.iter().map(|p| Cross::new(*p, 7, stroke)))?
                .label(&l.label)
                .legend(move |(x, y)| Cross::new((x + 12, y), 6, colour.stroke_width(2))),
        };
        if l.style != Style::Cross {
            c.draw_series(l.points.iter().map(|p| Circle::new(*p, 3, colour.filled())))?;
        }
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
