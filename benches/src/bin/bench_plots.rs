//! Draws the published benchmark figures from the GPU suite's CSV (`gpu_suite --benchmarks
//! --csv FILE`) and `torch_layernorm.py`'s output, and writes the README's tables:
//!
//! - `layer_norm_bandwidth.svg`: effective GB/s against `d` (16384 rows, f32), forward and
//!   forward + backward, for every backend of the CSV and PyTorch;
//! - `step_times.svg`: milliseconds per training step (transformer, MNIST) per backend;
//! - `tables.md`: the same numbers as Markdown tables;
//! - with `--soak LOG` instead: `soak.svg`, the memory CubeCL holds and reserves, the cache
//!   size and the time per step along a `gpu_suite --soak` run.
//!
//! ```text
//! cargo run --release -p ruda-benches --bin bench_plots -- \
//!     --csv OUT/benchmarks.csv --torch OUT/torch.tsv \
//!     --title "NVIDIA H200, 2026-11-30" --out docs/perf/plots
//! ```

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Parser;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use ruda_benches::report::{Measurement, SoakRow, parse_soak_rows, parse_torch_rows, read_csv};

/// Rows of the bandwidth sweep.
const SWEEP_ROWS: usize = 16384;

/// The order backends are listed in (others follow, sorted).
const ORDER: [&str; 7] = [
    "ruda-cuda",
    "burn-cuda",
    "pytorch",
    "ruda-cuda-composed",
    "ruda-wgpu",
    "burn-wgpu",
    "burn-ndarray",
];

/// Draws the benchmark figures and tables from the GPU suite's CSV and torch_layernorm.py's
/// output.
#[derive(Parser, Debug)]
#[command(name = "bench_plots")]
struct Cli {
    /// The GPU suite's --benchmarks CSV (several: comma-separated)
    #[arg(long, value_name = "FILE[,FILE...]", required_unless_present = "soak")]
    csv: Option<String>,
    /// A `gpu_suite --soak` log: draw its curves (soak.svg) instead of the benchmark figures
    #[arg(long, value_name = "FILE", conflicts_with_all = ["csv", "torch"])]
    soak: Option<PathBuf>,
    /// torch_layernorm.py's output
    #[arg(long, value_name = "FILE")]
    torch: Option<PathBuf>,
    /// Where the SVGs and tables.md go
    #[arg(long, value_name = "DIR", default_value = "docs/perf/plots")]
    out: PathBuf,
    /// The plots' title (the device and date)
    #[arg(long, default_value = "")]
    title: String,
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("bench_plots: {e}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<(), String> {
    let Cli {
        csv,
        soak,
        torch,
        out,
        title,
    } = cli;
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    if let Some(log) = soak {
        let text = std::fs::read_to_string(&log)
            .map_err(|e| format!("cannot read {}: {e}", log.display()))?;
        let rows = parse_soak_rows(&text);
        if rows.len() < 2 {
            return Err(format!("{}: fewer than two soak samples", log.display()));
        }
        let path = out.join("soak.svg");
        draw_soak(&rows, &title, &path).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("wrote {}", path.display());
        return Ok(());
    }
    let mut rows = Vec::new();
    for path in csv.unwrap_or_default().split(',').filter(|p| !p.is_empty()) {
        rows.extend(read_csv(Path::new(path))?);
    }
    if let Some(path) = &torch {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let torch_rows = parse_torch_rows(&text);
        if torch_rows.is_empty() {
            return Err(format!(
                "{}: no float32 rows of torch_layernorm.py",
                path.display()
            ));
        }
        rows.extend(torch_rows);
    }

    let bandwidth = out.join("layer_norm_bandwidth.svg");
    draw_bandwidth(&rows, &title, &bandwidth)
        .map_err(|e| format!("{}: {e}", bandwidth.display()))?;
    let steps = out.join("step_times.svg");
    draw_steps(&rows, &title, &steps).map_err(|e| format!("{}: {e}", steps.display()))?;
    let tables = out.join("tables.md");
    std::fs::write(&tables, markdown_tables(&rows))
        .map_err(|e| format!("cannot write {}: {e}", tables.display()))?;
    for path in [bandwidth, steps, tables] {
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Backends present in `rows`, in [`ORDER`].
fn backends<'a>(rows: impl Iterator<Item = &'a Measurement>) -> Vec<String> {
    let present: BTreeSet<String> = rows.map(|r| r.backend.clone()).collect();
    let mut out: Vec<String> = ORDER
        .iter()
        .filter(|b| present.contains(**b))
        .map(|b| b.to_string())
        .collect();
    out.extend(present.into_iter().filter(|b| !ORDER.contains(&b.as_str())));
    out
}

/// `(rows, d, pass)` of a LayerNorm case such as `16384x1024/fwdbwd`.
fn layer_norm_case(case: &str) -> Option<(usize, usize, &str)> {
    let (shape, pass) = case.split_once('/')?;
    let (rows, d) = shape.split_once('x')?;
    Some((rows.parse().ok()?, d.parse().ok()?, pass))
}

/// The curves of one pass: through Burn per backend, PyTorch, and ruda's kernels alone.
fn bandwidth_series(rows: &[Measurement], pass: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut series = Vec::new();
    let groups = [
        ("layer_norm_burn", ""),
        ("layer_norm_torch", ""),
        ("layer_norm_kernel", " (kernels alone)"),
    ];
    for (group, suffix) in groups {
        let in_group = || rows.iter().filter(move |r| r.group == group);
        for backend in backends(in_group()) {
            let mut points: Vec<(f64, f64)> = in_group()
                .filter(|r| r.backend == backend)
                .filter_map(|r| {
                    let (n, d, p) = layer_norm_case(&r.case)?;
                    (n == SWEEP_ROWS && p == pass).then_some(((d as f64).log2(), r.throughput))
                })
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            if !points.is_empty() {
                series.push((format!("{backend}{suffix}"), points));
            }
        }
    }
    series
}

fn draw_bandwidth(rows: &[Measurement], title: &str, path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (1200, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(600);
    for (area, pass, name) in [
        (left, "fwd", "forward"),
        (right, "fwdbwd", "forward + backward"),
    ] {
        let series = bandwidth_series(rows, pass);
        let top = series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
            .fold(1.0f64, f64::max);
        let mut chart = ChartBuilder::on(&area)
            .caption(
                format!("LayerNorm {name}, f32, {SWEEP_ROWS} rows{}", suffix(title)),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(7.8f64..13.2f64, 0f64..top * 1.25)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("d (log scale)")
            .y_desc("effective GB/s")
            .x_labels(6)
            .x_label_formatter(&|v| format!("{}", 2f64.powf(*v).round()))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, (label, points)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let dashed = label.contains("kernels alone");
            let style = color.stroke_width(if dashed { 1 } else { 2 });
            chart
                .draw_series(LineSeries::new(points.clone(), style))
                .map_err(|e| e.to_string())?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| e.to_string())?;
        }
        legend(&mut chart)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Two panels over the steps of a soak run: MiB in use, reserved and on disk (the cache root);
/// milliseconds per step.
fn draw_soak(rows: &[SoakRow], title: &str, path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (1200, 450)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(600);
    let last_step = rows.iter().map(|r| r.step).max().unwrap_or(1) as f64;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let memory: [(&str, Vec<(f64, f64)>); 3] = [
        (
            "device memory in use",
            rows.iter()
                .map(|r| (r.step as f64, mib(r.bytes_in_use)))
                .collect(),
        ),
        (
            "device memory reserved",
            rows.iter()
                .map(|r| (r.step as f64, mib(r.bytes_reserved)))
                .collect(),
        ),
        (
            "cache directory",
            rows.iter()
                .map(|r| (r.step as f64, mib(r.cache_bytes)))
                .collect(),
        ),
    ];
    let top = memory
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
        .fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(&left)
        .caption(
            format!("Soak run: memory{}", suffix(title)),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..last_step, 0f64..top * 1.3)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc("MiB")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (label, points)) in memory.iter().enumerate() {
        let style = Palette99::pick(i).to_rgba().stroke_width(2);
        chart
            .draw_series(LineSeries::new(points.clone(), style))
            .map_err(|e| e.to_string())?
            .label(*label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
    }
    legend(&mut chart)?;

    // The first sample holds compilation and tuning: the time panel starts after it.
    let times: Vec<(f64, f64)> = rows
        .iter()
        .skip(1)
        .map(|r| (r.step as f64, r.ms_per_step))
        .collect();
    let slowest = times.iter().map(|&(_, y)| y).fold(0.1f64, f64::max);
    let mut chart = ChartBuilder::on(&right)
        .caption(
            format!("Soak run: time per step{}", suffix(title)),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..last_step, 0f64..slowest * 1.2)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc("ms per step (mean since the previous sample)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.1}"))
        .draw()
        .map_err(|e| e.to_string())?;
    let style = Palette99::pick(0).to_rgba().stroke_width(2);
    chart
        .draw_series(LineSeries::new(times, style))
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

fn legend<'a, 'b>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
) -> Result<(), String>
where
    'b: 'a,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())
}

fn suffix(title: &str) -> String {
    if title.is_empty() {
        String::new()
    } else {
        format!(" ({title})")
    }
}

fn draw_steps(rows: &[Measurement], title: &str, path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (1200, 450)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(600);
    for (area, group, name) in [
        (left, "transformer_step", "transformer training step"),
        (right, "mnist_step", "MNIST training step"),
    ] {
        let in_group: Vec<&Measurement> = rows.iter().filter(|r| r.group == group).collect();
        let names = backends(in_group.iter().copied());
        let bars: Vec<(String, f64)> = names
            .iter()
            .filter_map(|b| {
                let r = in_group.iter().find(|r| &r.backend == b)?;
                Some((b.clone(), r.median_us / 1e3))
            })
            .collect();
        let case = in_group.first().map_or("", |r| r.case.as_str());
        // Log scale: a CPU backend's step can be hundreds of times a GPU's.
        let top = bars.iter().map(|b| b.1).fold(0.1f64, f64::max) * 3.0;
        let least = bars.iter().map(|b| b.1).fold(top, f64::min);
        let bottom = 10f64.powf((least / 2.0).log10().floor());
        let mut chart = ChartBuilder::on(&area)
            .caption(
                format!("{name} {case}{}", suffix(title)),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(
                (0..bars.len().saturating_sub(1)).into_segmented(),
                (bottom..top).log_scale(),
            )
            .map_err(|e| e.to_string())?;
        let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc("ms per step (median, log scale)")
            .y_label_formatter(&|v| {
                if *v >= 1.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v}")
                }
            })
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, (_, ms)) in bars.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), bottom),
                    (SegmentValue::Exact(i + 1), *ms),
                ],
                color.filled(),
            );
            bar.set_margin(0, 0, 12, 12);
            chart.draw_series([bar]).map_err(|e| e.to_string())?;
            chart
                .draw_series([Text::new(
                    format!("{ms:.1}"),
                    (SegmentValue::CenterOf(i), *ms),
                    ("sans-serif", 13)
                        .into_font()
                        .into_text_style(&root)
                        .pos(Pos::new(HPos::Center, VPos::Bottom)),
                )])
                .map_err(|e| e.to_string())?;
        }
    }
    root.present().map_err(|e| e.to_string())
}

/// The README's tables: LayerNorm through Burn (and PyTorch) per shape and pass with ruda's
/// speed-up, ruda's kernels alone, and the training steps.
fn markdown_tables(rows: &[Measurement]) -> String {
    let mut md = String::new();
    let burn_and_torch: Vec<&Measurement> = rows
        .iter()
        .filter(|r| r.group == "layer_norm_burn" || r.group == "layer_norm_torch")
        .collect();
    let names = backends(burn_and_torch.iter().copied());
    let mut cases: Vec<(usize, usize, String)> = burn_and_torch
        .iter()
        .filter(|r| r.group == "layer_norm_burn")
        .filter_map(|r| layer_norm_case(&r.case).map(|(n, d, p)| (n, d, p.to_string())))
        .collect();
    cases.sort_by_key(|a| (a.2.clone(), a.0, a.1));
    cases.dedup();
    let find = |group_burn: &str, backend: &str, case: &str| {
        rows.iter()
            .find(|r| {
                r.backend == backend
                    && r.case == case
                    && (r.group == group_burn || r.group == "layer_norm_torch")
            })
            .map(|r| r.median_us)
    };
    let pairs: Vec<(&str, &str)> = COMPARISONS
        .iter()
        .filter(|(r, b)| names.iter().any(|n| n == r) && names.iter().any(|n| n == b))
        .copied()
        .collect();
    let _ = writeln!(
        md,
        "LayerNorm through Burn (`burn::nn::LayerNorm`, f32; fwd on the inner backend, fwdbwd = \
         forward + `y.backward()` + `x.grad`), median µs per call; PyTorch: `torch_layernorm.py`; \
         \"A / B\": B's time over A's (above 1: A is faster).\n"
    );
    let mut header = "| pass | shape |".to_string();
    let mut rule = "|---|---|".to_string();
    for b in &names {
        let _ = write!(header, " {b} |");
        rule.push_str("---:|");
    }
    for (r, b) in &pairs {
        let _ = write!(header, " {r} / {b} |");
        rule.push_str("---:|");
    }
    let _ = writeln!(md, "{header}\n{rule}");
    for (n, d, pass) in &cases {
        let case = format!("{n}x{d}/{pass}");
        let mut line = format!("| {pass} | {n}x{d} |");
        for b in &names {
            let t = find("layer_norm_burn", b, &case);
            let _ = write!(line, " {} |", t.map_or("–".into(), |t| format!("{t:.1}")));
        }
        for (r, b) in &pairs {
            let mine = find("layer_norm_burn", r, &case);
            let theirs = find("layer_norm_burn", b, &case);
            let _ = write!(line, " {} |", speedup(mine, theirs));
        }
        let _ = writeln!(md, "{line}");
    }

    let kernels: Vec<&Measurement> = rows
        .iter()
        .filter(|r| r.group == "layer_norm_kernel")
        .collect();
    if !kernels.is_empty() {
        let kernel_backends = backends(kernels.iter().copied());
        let _ = writeln!(
            md,
            "\nruda's LayerNorm kernels alone (through the runtime, no Burn), f32, median µs \
             (effective GB/s):\n"
        );
        let mut header = "| pass | shape |".to_string();
        let mut rule = "|---|---|".to_string();
        for b in &kernel_backends {
            let _ = write!(header, " {b} |");
            rule.push_str("---:|");
        }
        let _ = writeln!(md, "{header}\n{rule}");
        let mut kernel_cases: Vec<(usize, usize, String)> = kernels
            .iter()
            .filter_map(|r| layer_norm_case(&r.case).map(|(n, d, p)| (n, d, p.to_string())))
            .collect();
        kernel_cases.sort_by_key(|a| (a.2.clone(), a.0, a.1));
        kernel_cases.dedup();
        for (n, d, pass) in &kernel_cases {
            let case = format!("{n}x{d}/{pass}");
            let mut line = format!("| {pass} | {n}x{d} |");
            for b in &kernel_backends {
                let cell = kernels
                    .iter()
                    .find(|r| &r.backend == b && r.case == case)
                    .map_or("–".into(), |r| {
                        format!("{:.1} ({:.0})", r.median_us, r.throughput)
                    });
                let _ = write!(line, " {cell} |");
            }
            let _ = writeln!(md, "{line}");
        }
    }

    let steps: Vec<&Measurement> = rows.iter().filter(|r| r.group.ends_with("_step")).collect();
    if !steps.is_empty() {
        let _ = writeln!(
            md,
            "\nTraining steps (Adam, random batch; median of synchronized steps); \"vs ruda\": this \
             row's time over ruda's on the same kind of device:\n\n\
             | step | case | backend | ms/step | throughput | vs ruda |\n|---|---|---|---:|---:|---:|"
        );
        for r in &steps {
            let ruda_time = steps
                .iter()
                .find(|s| s.group == r.group && is_ruda(&s.backend) && same_kind(s, r))
                .map(|s| s.median_us);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.2} | {:.0} {} | {} |",
                r.group,
                r.case,
                r.backend,
                r.median_us / 1e3,
                r.throughput,
                r.unit,
                speedup(ruda_time, Some(r.median_us))
            );
        }
    }
    md
}

/// The ratio columns of the LayerNorm table: ruda against the alternatives a user has on the
/// same device (a CPU-only machine: lavapipe against NdArray).
const COMPARISONS: [(&str, &str); 4] = [
    ("ruda-cuda", "burn-cuda"),
    ("ruda-cuda", "pytorch"),
    ("ruda-wgpu", "burn-wgpu"),
    ("ruda-wgpu", "burn-ndarray"),
];

/// Whether two rows ran on the same kind of device (CUDA, a wgpu GPU, the CPU): NdArray compares
/// with ruda on lavapipe, not with ruda on a GPU.
fn same_kind(a: &Measurement, b: &Measurement) -> bool {
    let kind = |m: &Measurement| {
        if m.device.starts_with("cuda") {
            "cuda"
        } else if m.device == "cpu" || m.device == "wgpu:Cpu" {
            "cpu"
        } else {
            "gpu"
        }
    };
    kind(a) == kind(b)
}

/// ruda's published backends (not `ruda-cuda-composed`, Burn's autodiff over Ruda).
fn is_ruda(backend: &str) -> bool {
    backend == "ruda-cuda" || backend == "ruda-wgpu"
}

/// `theirs / mine` as `2.50x` (above 1: ruda is faster), `–` when either is missing.
fn speedup(mine: Option<f64>, theirs: Option<f64>) -> String {
    match (mine, theirs) {
        (Some(m), Some(t)) if m > 0.0 => format!("{:.2}x", t / m),
        _ => "–".into(),
    }
}
