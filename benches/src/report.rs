//! One measured result, as a table row and as a CSV line (the format `examples/bench_plots.rs`
//! reads).

use std::io::Write;
use std::path::Path;

use crate::contenders::Contender;
use crate::layer_norm::Pass;
use crate::timing::TimingPlan;
use crate::workloads::Workload;

/// The CSV columns, in order.
pub const CSV_HEADER: &str =
    "group,case,backend,backend_type,device,median_us,throughput,unit,warmup,iters";

/// The median time of one workload on one contender.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// [`Workload::group`].
    pub group: String,
    /// [`Workload::case`].
    pub case: String,
    /// [`Contender::name`], or `torch` for PyTorch's rows.
    pub backend: String,
    /// [`Contender::backend_type`].
    pub backend_type: String,
    /// [`Contender::device_label`].
    pub device: String,
    /// Median wall-clock microseconds of one synchronized call.
    pub median_us: f64,
    /// [`Workload::throughput`] at the median.
    pub throughput: f64,
    /// [`Workload::throughput_unit`].
    pub unit: String,
    /// Untimed calls first.
    pub warmup: usize,
    /// Timed calls.
    pub iters: usize,
}

impl Measurement {
    pub(crate) fn new(
        contender: &Contender,
        workload: &Workload,
        median_us: f64,
        plan: TimingPlan,
    ) -> Self {
        Self {
            group: workload.group().into(),
            case: workload.case(),
            backend: contender.name().into(),
            backend_type: contender.backend_type().into(),
            device: contender.device_label(),
            median_us,
            throughput: workload.throughput(median_us),
            unit: workload.throughput_unit().into(),
            warmup: plan.warmup,
            iters: plan.iters,
        }
    }

    /// Tab-separated: group, case, backend, median µs, throughput with its unit, device.
    pub fn table_row(&self) -> String {
        format!(
            "{}\t{}\t{}\t{:.1}\t{:.1} {}\t{}",
            self.group,
            self.case,
            self.backend,
            self.median_us,
            self.throughput,
            self.unit,
            self.device
        )
    }

    /// One line of the CSV ([`CSV_HEADER`]'s columns). No field holds a comma.
    pub fn csv_line(&self) -> String {
        format!(
            "{},{},{},{},{},{:.2},{:.3},{},{},{}",
            self.group,
            self.case,
            self.backend,
            self.backend_type,
            self.device,
            self.median_us,
            self.throughput,
            self.unit,
            self.warmup,
            self.iters
        )
    }

    /// Parses a line written by [`Measurement::csv_line`].
    pub fn parse_csv_line(line: &str) -> Result<Self, String> {
        let fields: Vec<&str> = line.trim_end().split(',').collect();
        let [
            group,
            case,
            backend,
            backend_type,
            device,
            median_us,
            throughput,
            unit,
            warmup,
            iters,
        ] = fields[..]
        else {
            return Err(format!(
                "expected 10 comma-separated fields ({CSV_HEADER}), found {}: {line:?}",
                fields.len()
            ));
        };
        let number = |name: &str, value: &str| {
            value
                .parse::<f64>()
                .map_err(|e| format!("column {name}: {value:?} is not a number ({e})"))
        };
        let count = |name: &str, value: &str| {
            value
                .parse::<usize>()
                .map_err(|e| format!("column {name}: {value:?} is not a count ({e})"))
        };
        Ok(Self {
            group: group.into(),
            case: case.into(),
            backend: backend.into(),
            backend_type: backend_type.into(),
            device: device.into(),
            median_us: number("median_us", median_us)?,
            throughput: number("throughput", throughput)?,
            unit: unit.into(),
            warmup: count("warmup", warmup)?,
            iters: count("iters", iters)?,
        })
    }
}

/// Writes `rows` with the header to `path` (creating its directory).
pub fn write_csv(path: &Path, rows: &[Measurement]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(file, "{CSV_HEADER}")?;
    for row in rows {
        writeln!(file, "{}", row.csv_line())?;
    }
    file.flush()
}

/// Reads a CSV written by [`write_csv`]; errors name the file and the line.
pub fn read_csv(path: &Path) -> Result<Vec<Measurement>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, header)) if header.trim_end() == CSV_HEADER => {}
        other => {
            return Err(format!(
                "{}: the first line must be the header {CSV_HEADER:?}, found {:?}",
                path.display(),
                other.map(|(_, l)| l)
            ));
        }
    }
    lines
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            Measurement::parse_csv_line(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Reads the rows `torch_layernorm.py` prints (`torch dtype RxD fwd_us fwd_GBps fwdbwd_us
/// fwdbwd_GBps`, tab-separated) as measurements of group `layer_norm_torch`, backend `pytorch`,
/// one per pass, f32 rows only; other lines (its copy-bandwidth line, comments) are skipped.
/// The bandwidth is recomputed from the time with [`Pass::elements_moved`], as ours is.
pub fn parse_torch_rows(text: &str) -> Vec<Measurement> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        let ["torch", "float32", shape, fwd_us, _, fwdbwd_us, _] = fields[..] else {
            continue;
        };
        let Some((rows, d)) = shape
            .split_once('x')
            .and_then(|(r, d)| Some((r.parse::<usize>().ok()?, d.parse::<usize>().ok()?)))
        else {
            continue;
        };
        for (pass, us) in [(Pass::Forward, fwd_us), (Pass::ForwardBackward, fwdbwd_us)] {
            let Ok(median_us) = us.parse::<f64>() else {
                continue;
            };
            let workload = Workload::LayerNormBurn { rows, d, pass };
            out.push(Measurement {
                group: "layer_norm_torch".into(),
                case: workload.case(),
                backend: "pytorch".into(),
                backend_type: "torch.nn.functional.layer_norm".into(),
                device: "cuda:0".into(),
                median_us,
                throughput: workload.throughput(median_us),
                unit: workload.throughput_unit().into(),
                warmup: 10,
                iters: 50,
            });
        }
    }
    out
}

/// One sample line of `gpu_suite --soak` (`ruda_tests::soak::Sample::line`: step, bytes in use,
/// bytes reserved, cache bytes, ms per step, loss; tab-separated).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoakRow {
    /// Steps done.
    pub step: usize,
    /// Bytes CubeCL's allocations hold.
    pub bytes_in_use: u64,
    /// Bytes CubeCL's memory pool has reserved on the device.
    pub bytes_reserved: u64,
    /// Bytes of every file under the cache root.
    pub cache_bytes: u64,
    /// Mean wall time of a step since the previous sample.
    pub ms_per_step: f64,
    /// The last step's loss.
    pub loss: f64,
}

/// The sample lines of a `gpu_suite --soak` log, in order; every other line (the header,
/// comments, other steps' output) is skipped.
pub fn parse_soak_rows(text: &str) -> Vec<SoakRow> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.trim_end().split('\t').collect();
            let [step, in_use, reserved, cache, ms, loss] = fields[..] else {
                return None;
            };
            Some(SoakRow {
                step: step.parse().ok()?,
                bytes_in_use: in_use.parse().ok()?,
                bytes_reserved: reserved.parse().ok()?,
                cache_bytes: cache.parse().ok()?,
                ms_per_step: ms.parse().ok()?,
                loss: loss.parse().ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::layer_norm::Pass;
    use crate::workloads::Workload;

    #[test]
    fn csv_round_trip() {
        let workload = Workload::LayerNormBurn {
            rows: 16384,
            d: 1024,
            pass: Pass::ForwardBackward,
        };
        let row = Measurement::new(&Contender::NdArray, &workload, 250.0, TimingPlan::STANDARD);
        // 16384 * 1024 * 5 * 4 bytes in 250 us.
        assert!(
            (row.throughput - 1342.177).abs() < 1e-3,
            "{}",
            row.throughput
        );
        assert_eq!(
            Measurement::parse_csv_line(&row.csv_line()).unwrap(),
            Measurement {
                throughput: 1342.177,
                ..row.clone()
            }
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/bench.csv");
        write_csv(&path, std::slice::from_ref(&row)).unwrap();
        assert_eq!(read_csv(&path).unwrap().len(), 1);
    }

    #[test]
    fn csv_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.csv");
        std::fs::write(&path, format!("{CSV_HEADER}\na,b,c\n")).unwrap();
        let err = read_csv(&path).unwrap_err();
        assert!(
            err.contains("bad.csv:2") && err.contains("found 3"),
            "{err}"
        );
        std::fs::write(&path, "not a header\n").unwrap();
        assert!(read_csv(&path).unwrap_err().contains("header"));
    }

    #[test]
    fn torch_rows() {
        let text = "torch\tfloat32\t16384x1024\t50.0\t2684\t125.0\t2684\n\
                    torch\tbfloat16\t16384x1024\t30.0\t2237\t80.0\t2097\n\
                    copy\tfloat32\t536870912\t900.0\t4772\t-\t-\n";
        let rows = parse_torch_rows(text);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].case, "16384x1024/fwd");
        assert_eq!(rows[1].case, "16384x1024/fwdbwd");
        // 16384 * 1024 * 2 * 4 bytes in 50 us.
        assert!(
            (rows[0].throughput - 2684.35).abs() < 0.01,
            "{}",
            rows[0].throughput
        );
    }

    #[test]
    fn soak_rows_are_read_and_other_lines_skipped() {
        let log = "## Soak: 3 steps\n\
                   step\tbytes_in_use\tbytes_reserved\tcache_bytes\tms_per_step\tloss\n\
                   1\t1024\t2048\t0\t812.500\t4.3301\n\
                   # flat after the warm-up (1 steps)\n\
                   2\t1024\t2048\t512\t3.250\t4.1000\n";
        let rows = parse_soak_rows(log);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].step, 1);
        assert_eq!(rows[1].cache_bytes, 512);
        assert!((rows[1].ms_per_step - 3.25).abs() < 1e-12);
    }
}
