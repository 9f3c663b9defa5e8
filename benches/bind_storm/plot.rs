//! The plots of docs/performance.md, drawn by the bench from a results
//! file (`--plot results.jsonl DIR`) as SVG with plotters: text stays text
//! (the viewer's sans-serif font draws it), so the plots need no font on
//! the machine that draws them, and a redrawn plot diffs as text.
//!
//! - `performance-scale.svg`: time and CPU per pair against N on memapi;
//! - `performance-upstream.svg`: pv-controller beside kube-controller-manager
//!   on a real API server (seconds, CPU, memory);
//! - the write limit's path through the newest storm that recorded it
//!   (`--plot-limit-path results.jsonl OUT.svg`): the limit and the writes
//!   in flight, writes and 429s a second, and the writes' latency, over time.
//!
//! Each point or bar is the median of the runs of the version that ran it
//! last (the file keeps every run of every version, oldest first; runs
//! without a commit count as one version).

use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

const FONT: &str = "sans-serif";
const BLUE: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(230, 120, 20);
const GREEN: RGBColor = RGBColor(44, 160, 44);
const RED: RGBColor = RGBColor(200, 40, 40);

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Reads `input` and writes both plots into `dir`.
pub(crate) fn draw(input: &Path, dir: &Path) -> Result<()> {
    let text = std::fs::read_to_string(input)?;
    let runs: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let scale = dir.join("performance-scale.svg");
    draw_scale(&runs, &scale)?;
    println!("plot written to {}", scale.display());
    let upstream = dir.join("performance-upstream.svg");
    draw_upstream(&runs, &upstream)?;
    println!("plot written to {}", upstream.display());
    Ok(())
}

/// The runs of one controller, server, N and mix with the bench's default
/// controller flags, newest version only: the commit and the runs.
fn newest<'a>(
    runs: &'a [Value],
    controller: &str,
    server: &str,
    pairs: u64,
    mix: &str,
) -> Option<(String, Vec<&'a Value>)> {
    let matching: Vec<&Value> = runs
        .iter()
        .filter(|r| r["controller"] == controller && r["server"] == server)
        .filter(|r| r["pairs"].as_u64() == Some(pairs) && r["mix"] == mix)
        .filter(|r| {
            // Upstream runs always carry its client limits; ours, none.
            controller != "pv-controller" || r["controller_flags"] == ""
        })
        .collect();
    let latest = commit_of(matching.last()?);
    let same: Vec<&Value> = matching
        .into_iter()
        .filter(|r| commit_of(r) == latest)
        .collect();
    Some((latest, same))
}

/// A run's commit without the `+` of a tree with other changes.
fn commit_of(run: &Value) -> String {
    run["commit"]
        .as_str()
        .map_or_else(String::new, |c| c.trim_end_matches('+').to_string())
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if !n.is_multiple_of(2) => Some(values[n / 2]),
        _ => Some(f64::midpoint(values[n / 2 - 1], values[n / 2])),
    }
}

fn median_of(runs: &[&Value], figure: &str) -> Option<f64> {
    median(runs.iter().filter_map(|r| r[figure].as_f64()).collect())
}

/// One line of the scale plot.
struct Line {
    label: String,
    color: RGBColor,
    dashed: bool,
    /// Whether the values are written below the points (the CPU, which is
    /// at most the wall clock) rather than above.
    below: bool,
    /// (N, microseconds per pair).
    points: Vec<(f64, f64)>,
}

/// Microseconds per pair of `figure` (seconds) for each N of `mix`, from
/// the newest version that ran at least two sizes of it (one version per
/// line, so the line shows how that version's cost grows); the label names
/// the version.
fn per_pair(runs: &[Value], mix: &str, figure: &str, what: &str) -> (Vec<(f64, f64)>, String) {
    let ours: Vec<&Value> = runs
        .iter()
        .filter(|r| r["server"] == "memapi" && r["controller"] == "pv-controller")
        .filter(|r| r["mix"] == mix && r["controller_flags"] == "")
        .collect();
    let sizes_of = |commit: &str| -> BTreeMap<u64, Vec<&Value>> {
        let mut sizes: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
        for r in ours.iter().filter(|r| commit_of(r) == commit) {
            if let Some(n) = r["pairs"].as_u64() {
                sizes.entry(n).or_default().push(r);
            }
        }
        sizes
    };
    let Some(commit) = ours
        .iter()
        .rev()
        .map(|r| commit_of(r))
        .find(|c| sizes_of(c).len() >= 2)
    else {
        return (Vec::new(), format!("{what}, {mix} mix (no runs)"));
    };
    let points = sizes_of(&commit)
        .into_iter()
        .filter_map(|(n, same)| Some((n as f64, median_of(&same, figure)? / n as f64 * 1e6)))
        .collect();
    let version = if commit.is_empty() {
        "first runs".to_string()
    } else {
        commit
    };
    (points, format!("{what}, {mix} mix ({version})"))
}

fn draw_scale(runs: &[Value], path: &Path) -> Result<()> {
    let mut lines = Vec::new();
    for (mix, dashed) in [("full", false), ("plain", true)] {
        for (figure, what, color) in [
            (
                "seconds_to_all_bound",
                "wall clock",
                if dashed { GREEN } else { BLUE },
            ),
            (
                "cpu_seconds",
                "controller CPU",
                if dashed { ORANGE } else { RED },
            ),
        ] {
            let (points, label) = per_pair(runs, mix, figure, what);
            lines.push(Line {
                label,
                color,
                below: figure == "cpu_seconds",
                dashed,
                points,
            });
        }
    }
    let top = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        * 1.25;
    let root = SVGBackend::new(path, (1000, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Time and CPU per pair against cluster size (memapi, pv-controller)",
            (FONT, 26),
        )
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(80)
        .build_cartesian_2d((700f64..150_000f64).log_scale(), 0f64..top.max(1.0))?;
    chart
        .configure_mesh()
        .x_desc("volume/claim pairs created before the controller starts (log scale)")
        .y_desc("microseconds per pair")
        .axis_desc_style((FONT, 20))
        .label_style((FONT, 17))
        .x_label_formatter(&|n| thousands(*n))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    for line in &lines {
        let color = line.color;
        let style = color.stroke_width(3);
        if line.dashed {
            chart.draw_series(DashedLineSeries::new(
                line.points.iter().copied(),
                10,
                6,
                style,
            ))?;
        } else {
            chart.draw_series(LineSeries::new(line.points.iter().copied(), style))?;
        }
        chart
            .draw_series(
                line.points
                    .iter()
                    .map(|&p| Circle::new(p, 5, color.filled())),
            )?
            .label(&line.label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 30, y)], color.stroke_width(3))
            });
        let place = if line.below { VPos::Top } else { VPos::Bottom };
        chart.draw_series(line.points.iter().map(|&(n, v)| {
            Text::new(
                format!("{v:.0}"),
                (n, v),
                TextStyle::from((FONT, 15).into_font())
                    .color(&color)
                    .pos(Pos::new(HPos::Left, place)),
            )
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 17))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// N in thousands: 1,000 → "1,000".
fn thousands(n: f64) -> String {
    let n = n.round() as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One workload of the comparison: the figures of both controllers.
struct Workload {
    title: String,
    /// Seconds to all bound (or to the last bind), CPU seconds, peak RSS MiB.
    ours: [f64; 3],
    upstream: [f64; 3],
    /// Claims upstream left Pending.
    upstream_pending: u64,
}

fn workload(runs: &[Value], pairs: u64, mix: &str, title: &str) -> Option<Workload> {
    let figures = |runs: &[&Value]| -> Option<[f64; 3]> {
        Some([
            median_of(runs, "seconds_to_all_bound")?,
            median_of(runs, "cpu_seconds")?,
            median_of(runs, "peak_rss_mib")?,
        ])
    };
    let (ours_commit, ours) = newest(runs, "pv-controller", "kube-apiserver", pairs, mix)?;
    let (_, upstream) = newest(
        runs,
        "kube-controller-manager",
        "kube-apiserver",
        pairs,
        mix,
    )?;
    let pending = upstream
        .iter()
        .filter_map(|r| r["claims_pending"].as_u64())
        .max()
        .unwrap_or(0);
    let runs = if ours.len() == 1 {
        "1 run".to_string()
    } else {
        format!("median of {} runs", ours.len())
    };
    let commit = if ours_commit.is_empty() {
        String::new()
    } else {
        format!(" {ours_commit}")
    };
    Some(Workload {
        title: format!("{title} (pv-controller{commit}: {runs})"),
        ours: figures(&ours)?,
        upstream: figures(&upstream)?,
        upstream_pending: pending,
    })
}

fn draw_upstream(runs: &[Value], path: &Path) -> Result<()> {
    let workloads: Vec<Workload> = [
        (20_000, "full", "20,000 pairs, full mix"),
        (5_000, "plain", "5,000 pairs, plain mix"),
    ]
    .into_iter()
    .filter_map(|(n, mix, title)| workload(runs, n, mix, title))
    .collect();
    let rows = workloads.len().max(1);
    let root = SVGBackend::new(path, (1200, 120 + 400 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        "pv-controller beside kube-controller-manager 1.20.2 on kube-apiserver 1.20.2 (binder alone, lower is better)",
        (FONT, 24),
    )?;
    let (legend, body) = root.split_vertically(50);
    draw_legend(&legend)?;
    let rows_areas = body.split_evenly((rows, 1));
    for (workload, area) in workloads.iter().zip(rows_areas) {
        let (title, panels) = area.split_vertically(36);
        title.draw(&Text::new(
            workload.title.clone(),
            (20, 8),
            (FONT, 20).into_font(),
        ))?;
        let panels = panels.split_evenly((1, 3));
        let names = [
            ("seconds to all claims bound", "seconds"),
            ("controller CPU", "CPU seconds"),
            ("peak memory (RSS)", "MiB"),
        ];
        for (i, (panel, (caption, unit))) in panels.iter().zip(names).enumerate() {
            let note = (i == 0 && workload.upstream_pending > 0)
                .then(|| format!("{} left Pending", workload.upstream_pending));
            draw_bars(
                panel,
                caption,
                unit,
                [workload.ours[i], workload.upstream[i]],
                note.as_deref(),
            )?;
        }
    }
    body.present()?;
    Ok(())
}

fn draw_legend(area: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<()> {
    let mut x = 60;
    for (name, color) in [
        ("pv-controller (default flags)", BLUE),
        (
            "kube-controller-manager (--kube-api-qps=1000 --kube-api-burst=2000)",
            ORANGE,
        ),
    ] {
        area.draw(&Rectangle::new([(x, 15), (x + 24, 35)], color.filled()))?;
        area.draw(&Text::new(name, (x + 32, 15), (FONT, 18).into_font()))?;
        x += 32 + 10 * name.len() as i32 + 40;
    }
    Ok(())
}

fn draw_bars(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    caption: &str,
    unit: &str,
    values: [f64; 2],
    note: Option<&str>,
) -> Result<()> {
    let top = values.iter().copied().fold(0.0, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 19))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d((0u32..1u32).into_segmented(), 0f64..top.max(1.0))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(unit)
        .axis_desc_style((FONT, 17))
        .label_style((FONT, 14))
        .y_label_formatter(&|v| {
            if top > 20.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        })
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(0) => "pv-controller".to_string(),
            SegmentValue::CenterOf(1) => "kube-controller-manager".to_string(),
            _ => String::new(),
        })
        .draw()?;
    for (i, (value, color)) in values.iter().zip([BLUE, ORANGE]).enumerate() {
        let i = i as u32;
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), *value),
            ],
            color.filled(),
        );
        bar.set_margin(0, 0, 18, 18);
        chart.draw_series(std::iter::once(bar))?;
        let mut label = format!("{value:.1}");
        if i == 1
            && let Some(note) = note
        {
            label = format!("{label} ({note})");
        }
        chart.draw_series(std::iter::once(Text::new(
            label,
            (SegmentValue::CenterOf(i), *value),
            TextStyle::from((FONT, 16).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom)),
        )))?;
    }
    Ok(())
}

/// One line of a limit path's panel: the point's figure, its label, its
/// colour.
type PathLine = (&'static str, &'static str, RGBColor);

/// Draws the limit's path of the newest run of `input` that recorded one
/// (`--limit-path`) into `out`.
pub(crate) fn draw_limit_path(input: &Path, out: &Path) -> Result<()> {
    let text = std::fs::read_to_string(input)?;
    let run = text
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["limit_path"].as_array().is_some_and(|p| !p.is_empty()))
        .ok_or("no run with a limit path")?;
    let points = run["limit_path"].as_array().ok_or("no limit path")?;
    let series = |figure: &str| -> Vec<(f64, f64)> {
        points
            .iter()
            .filter_map(|p| Some((p["t"].as_f64()?, p[figure].as_f64()?)))
            .collect()
    };
    let end = points
        .iter()
        .filter_map(|p| p["t"].as_f64())
        .fold(0.0, f64::max);
    let root = SVGBackend::new(out, (1000, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = format!(
        "The write limit through a storm of {} pairs ({} pairs/s)",
        thousands(run["pairs"].as_f64().unwrap_or(0.0)),
        run["pairs_per_second"]
            .as_f64()
            .map_or_else(|| "-".to_string(), |r| format!("{r:.0}")),
    );
    let root = root.titled(&title, (FONT, 24))?;
    let panels = root.split_evenly((3, 1));
    let panel_specs: [(&str, Vec<PathLine>); 3] = [
        (
            "writes at once",
            vec![
                ("limit", "limit", RED),
                ("in_flight", "writes in flight", BLUE),
            ],
        ),
        (
            "a second",
            vec![
                ("writes_per_second", "writes answered", GREEN),
                ("refused_per_second", "429 answers", ORANGE),
            ],
        ),
        (
            "ms",
            vec![(
                "latency_ms",
                "write latency (in flight ÷ writes a second)",
                BLUE,
            )],
        ),
    ];
    for (panel, (unit, lines)) in panels.iter().zip(panel_specs) {
        let top = lines
            .iter()
            .flat_map(|(figure, ..)| series(figure).into_iter().map(|p| p.1))
            .fold(0.0, f64::max)
            * 1.15;
        let mut chart = ChartBuilder::on(panel)
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..end.max(1.0), 0f64..top.max(1.0))?;
        chart
            .configure_mesh()
            .x_desc("seconds since the controller started")
            .y_desc(unit)
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 14))
            .draw()?;
        for (figure, label, color) in lines {
            chart
                .draw_series(LineSeries::new(series(figure), color.stroke_width(2)))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
