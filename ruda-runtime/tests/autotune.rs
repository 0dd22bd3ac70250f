//! Persistent autotuning keyed by the driver fingerprint, on Mesa's lavapipe.
//!
//! Most tests run LayerNorm in child processes: the test binary re-executes itself with
//! `RUDA_AUTOTUNE_PROBE` set, which turns the `probe_process` test into the probe (see
//! [`run_probe`]). Each child gets its own `RUDA_AUTOTUNE_DIR` and
//! `RUDA_AUTOTUNE_FINGERPRINT` (the documented override), and prints how many keys it tuned
//! and how many candidate runs that took.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use cubecl::tune::{LocalTuner, Tunable, TunableSet};
use cubecl::wgpu::WgpuDevice;
use ruda_runtime::autotune::{self, settings::*};
use ruda_runtime::cubecl::{self, Runtime as _, client::ComputeClient, zspace::Shape};
use ruda_runtime::layer_norm::{Variant, layer_norm_backward_with, layer_norm_forward_with};
use ruda_runtime::prelude::DType;
use ruda_runtime::{RudaWgpu, TensorBuffer, fingerprint_hash};
use ruda_runtime::{layer_norm_backward, layer_norm_forward};
use serial_test::serial;

const PROBE: &str = "RUDA_AUTOTUNE_PROBE";
/// Also run a CubeCL tuner keyed by `CubeTuneId`, as burn-cubecl's matmul/reduce/conv do.
const PROBE_CUBECL: &str = "RUDA_AUTOTUNE_PROBE_CUBECL";
/// Create a plain CubeCL client before the first ruda client.
const PROBE_PLAIN_FIRST: &str = "RUDA_AUTOTUNE_PROBE_PLAIN_FIRST";

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let x = (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(seed * 97);
            (x % 2001) as f32 / 1000.0 - 1.0 + (i / 7 % 3) as f32
        })
        .collect()
}

fn upload(client: &ComputeClient<RudaWgpu>, shape: &[usize], seed: u32) -> TensorBuffer {
    let n = shape.iter().product();
    TensorBuffer::from_f32s(
        client,
        &values(n, seed),
        Shape::from(shape.to_vec()),
        DType::F32,
    )
}

fn max_diff(client: &ComputeClient<RudaWgpu>, a: &TensorBuffer, b: &TensorBuffer) -> f32 {
    let (a, b) = (a.to_f32s(client), b.to_f32s(client));
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs() / (1.0 + y.abs()))
        .fold(0.0, f32::max)
}

/// Tuned forward and backward on `rows x d`, compared with a forced variant; the largest
/// relative difference.
fn tuned_vs_forced(client: &ComputeClient<RudaWgpu>, rows: usize, d: usize) -> f32 {
    let x = upload(client, &[rows, d], 1);
    let gamma = upload(client, &[d], 2);
    let beta = upload(client, &[d], 3);
    let dy = upload(client, &[rows, d], 4);
    let eps = 1e-5;
    let tuned = layer_norm_forward(client, x.clone(), gamma.clone(), Some(beta.clone()), eps);
    let forced = layer_norm_forward_with(
        client,
        x.clone(),
        gamma.clone(),
        Some(beta),
        eps,
        Variant::CubePerRowLooped,
    );
    let [_, mean, rstd] = forced.clone();
    let tuned_bwd = layer_norm_backward(
        client,
        x.clone(),
        gamma.clone(),
        dy.clone(),
        mean.clone(),
        rstd.clone(),
    );
    let forced_bwd =
        layer_norm_backward_with(client, x, gamma, dy, mean, rstd, Variant::CubePerRowLooped);
    let mut diff = 0.0f32;
    for (t, f) in tuned
        .iter()
        .zip(&forced)
        .chain(tuned_bwd.iter().zip(&forced_bwd))
    {
        diff = diff.max(max_diff(client, t, f));
    }
    diff
}

/// A stderr logger, so that CubeCL's and ruda's cache warnings reach the parent test.
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn
    }
    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            eprintln!("[{}] {}", record.level(), record.args());
        }
    }
    fn flush(&self) {}
}

/// The probe: LayerNorm forward and backward on the shapes of `RUDA_AUTOTUNE_PROBE`
/// (`ROWSxD,ROWSxD`), each checked against a forced variant, then the counters, the report and
/// the cache files, one `PROBE key=value` line each.
fn run_probe(shapes: &str) {
    log::set_logger(&StderrLogger).ok();
    log::set_max_level(log::LevelFilter::Warn);
    let device = WgpuDevice::Cpu;
    if std::env::var(PROBE_PLAIN_FIRST).is_ok() {
        // A plain CubeCL client loads CubeCL's configuration before any ruda client.
        let _ = cubecl::wgpu::WgpuRuntime::client(&device);
    }
    let client = RudaWgpu::client(&device);
    for shape in shapes.split(',') {
        let (rows, d) = shape.split_once('x').expect("ROWSxD");
        let diff = tuned_vs_forced(&client, rows.parse().unwrap(), d.parse().unwrap());
        println!("PROBE maxdiff={diff}");
        assert!(
            diff < 1e-4,
            "tuned LayerNorm differs from the forced variant: {diff}"
        );
    }
    if std::env::var(PROBE_CUBECL).is_ok() {
        // The cache identity burn-cubecl's tuners use: `CubeTuneId::new(client, device)`.
        #[derive(Clone)]
        struct Demo(ComputeClient<RudaWgpu>, TensorBuffer, TensorBuffer);
        fn run(demo: Demo, variant: Variant) -> Result<(), String> {
            let Demo(client, x, gamma) = demo;
            layer_norm_forward_with(&client, x, gamma, None, 1e-5, variant);
            Ok(())
        }
        static DEMO: LocalTuner<String, cubecl::CubeTuneId> = LocalTuner::new("ruda-probe");
        let set = DEMO.init(|| {
            TunableSet::new(
                |_: &Demo| "demo-key".to_string(),
                |_: &String, x: &Demo| x.clone(),
            )
            .with(Tunable::new("plane", |d: Demo| {
                run(d, Variant::PlanePerRow)
            }))
            .with(Tunable::new("looped", |d: Demo| {
                run(d, Variant::CubePerRowLooped)
            }))
        });
        let id = cubecl::CubeTuneId::new(&client, &device);
        println!("PROBE cubecl_id={id}");
        let demo = Demo(
            client.clone(),
            upload(&client, &[4, 64], 1),
            upload(&client, &[64], 2),
        );
        DEMO.execute(&id, &client, set, demo);
    }
    let stats = autotune::stats();
    println!(
        "PROBE passes={} runs={}",
        stats.tuning_passes, stats.benchmark_runs
    );
    let report = autotune::autotune_report(&client, &device);
    println!("{report}");
    for file in report.ruda_files.iter().chain(&report.cubecl_files) {
        println!("PROBE file={}", file.display());
    }
    println!("PROBE runtime_name={}", report.identity.runtime_name);
    for warning in autotune::cache_warnings() {
        println!("PROBE warning={warning}");
    }
}

#[test]
fn probe_process() {
    if let Ok(shapes) = std::env::var(PROBE) {
        run_probe(&shapes);
    }
}

struct Probe {
    stdout: String,
    stderr: String,
}

impl Probe {
    fn value(&self, key: &str) -> Option<String> {
        self.stdout.lines().find_map(|line| {
            line.strip_prefix("PROBE ")?
                .split(' ')
                .find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(String::from))
        })
    }
    fn count(&self, key: &str) -> u64 {
        self.value(key)
            .unwrap_or_else(|| panic!("probe printed no {key}:\n{}", self.stdout))
            .parse()
            .unwrap()
    }
    fn passes(&self) -> u64 {
        self.count("passes")
    }
    fn runs(&self) -> u64 {
        self.count("runs")
    }
}

fn probe_command(dir: &Path, fingerprint: &str, shapes: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "probe_process",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .current_dir(dir)
    .env(PROBE, shapes)
    .env(ENV_AUTOTUNE_DIR, dir.join("cache"))
    .env(ENV_AUTOTUNE_FINGERPRINT, fingerprint)
    // lavapipe is a CPU adapter: ruda tunes there only when asked.
    .env(ENV_AUTOTUNE, "on")
    .env_remove(PROBE_CUBECL)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

fn finish(output: Output) -> Probe {
    let probe = Probe {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(
        output.status.success(),
        "probe failed:\n{}\n{}",
        probe.stdout,
        probe.stderr
    );
    probe
}

fn probe(dir: &Path, fingerprint: &str, shapes: &str) -> Probe {
    finish(probe_command(dir, fingerprint, shapes).output().unwrap())
}

/// Every file under `dir` with its contents.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &mut out);
    out
}

/// The session directories (`...-session<pid>x<nonce>`) under `dir`'s cache.
fn session_dirs(dir: &Path) -> Vec<String> {
    let version_dir = dir
        .join("cache/autotune")
        .join(ruda_runtime::CUBECL_VERSION);
    std::fs::read_dir(version_dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.contains("-session"))
                .collect()
        })
        .unwrap_or_default()
}

/// A session directory of a process that no longer runs (killed before its exit cleanup) is
/// removed when the next process without a fingerprint starts.
#[test]
#[serial]
fn a_dead_sessions_directory_is_removed_by_the_next_session() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // No process has pid 4194304 + 1 (above Linux's pid_max).
    let stale = dir
        .join("cache/autotune")
        .join(ruda_runtime::CUBECL_VERSION)
        .join("device-0-0-wgpu_wgsl_-session4194305x1234");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("matmul.json.log"), b"{}\n").unwrap();
    finish(
        probe_command(dir, "none", "8x64")
            .env(PROBE_CUBECL, "1")
            .output()
            .unwrap(),
    );
    assert_eq!(session_dirs(dir), Vec::<String>::new());
}

/// A cache root that cannot be created (below a regular file: not even root can) is a warning,
/// and the run is correct without it (the probe checks its results against forced variants).
#[test]
#[serial]
fn an_uncreatable_cache_directory_is_a_warning_and_a_correct_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("not-a-directory"), b"").unwrap();
    let run = finish(
        probe_command(dir, "X", SHAPES)
            .env(ENV_AUTOTUNE_DIR, dir.join("not-a-directory/cache"))
            .env(PROBE_CUBECL, "1")
            .output()
            .unwrap(),
    );
    let warned = run.stdout.lines().any(|line| {
        line.starts_with("PROBE warning=autotune cache: cannot create")
            && line.contains("not-a-directory")
    });
    assert!(warned, "{}", run.stdout);
    assert_eq!(run.passes(), 4, "{}", run.stdout);
}

/// Unset, `RUDA_AUTOTUNE` tunes nothing of ruda's on a CPU adapter: no tuning pass, no ruda
/// cache file, and the default rule's results (the probe checks them against forced variants).
/// `RUDA_AUTOTUNE=on` tunes there (every other test here sets it).
#[test]
#[serial]
fn a_cpu_adapter_is_not_tuned_by_default() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let run = finish(
        probe_command(dir, "X", SHAPES)
            .env_remove(ENV_AUTOTUNE)
            .output()
            .unwrap(),
    );
    assert_eq!((run.passes(), run.runs()), (0, 0), "{}", run.stdout);
    assert!(!ruda_file(dir, "X", "layer-norm-forward").exists());
    let tuned = probe(dir, "X", SHAPES);
    assert_eq!(tuned.passes(), 4, "{}", tuned.stdout);
}

fn ruda_file(dir: &Path, fingerprint: &str, tuner: &str) -> PathBuf {
    dir.join("cache/autotune")
        .join(ruda_runtime::CUBECL_VERSION)
        .join(format!("ruda-fp{}", fingerprint_hash(fingerprint)))
        .join(format!("{tuner}.json.log"))
}

const SHAPES: &str = "64x256,8x1000";

#[test]
#[serial]
fn fingerprints_get_their_own_caches() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fwd_x = ruda_file(dir, "X", "layer-norm-forward");
    let bwd_x = ruda_file(dir, "X", "layer-norm-backward");

    // A (X): tunes each key once (2 shapes, forward and backward), writes X's cache.
    let a = finish(
        probe_command(dir, "X", SHAPES)
            .env(PROBE_CUBECL, "1")
            .output()
            .unwrap(),
    );
    assert_eq!(a.passes(), 4, "{}", a.stdout);
    assert!(a.runs() > 0);
    for file in [&fwd_x, &bwd_x] {
        let text = std::fs::read_to_string(file).unwrap();
        assert_eq!(text.lines().count(), 2, "{}: {text}", file.display());
    }
    // CubeCL's tuners key their directory on the fingerprint too.
    let name = a.value("runtime_name").unwrap();
    assert_eq!(name, format!("wgpu<wgsl>-fp{}", fingerprint_hash("X")));
    let cubecl_id = a.value("cubecl_id").unwrap();
    assert!(cubecl_id.ends_with(&name), "{cubecl_id}");
    let cubecl_dir = dir
        .join("cache/autotune")
        .join(ruda_runtime::CUBECL_VERSION)
        .join(cubecl_id.replace(['<', '>'], "_"));
    assert!(
        cubecl_dir.join("ruda-probe.json.log").exists(),
        "{}",
        a.stdout
    );
    let after_a = snapshot(dir);

    // B (X): everything comes from the cache; nothing is benchmarked or written.
    let b = probe(dir, "X", SHAPES);
    assert_eq!((b.passes(), b.runs()), (0, 0), "{}", b.stdout);
    assert_eq!(snapshot(dir), after_a, "B changed the cache");

    // C (Y): another driver, a fresh cache; X's is kept as it was.
    let c = probe(dir, "Y", SHAPES);
    assert_eq!(c.passes(), 4, "{}", c.stdout);
    assert!(c.runs() > 0);
    assert!(ruda_file(dir, "Y", "layer-norm-forward").exists());
    let after_c = snapshot(dir);
    for (path, content) in &after_a {
        assert_eq!(
            after_c.get(path),
            Some(content),
            "C changed {}",
            path.display()
        );
    }

    // D (no fingerprint): tunes in memory, reads and writes nothing.
    let d = probe(dir, "none", SHAPES);
    assert_eq!(d.passes(), 4, "{}", d.stdout);
    assert!(d.runs() > 0);
    assert_eq!(snapshot(dir), after_c, "D touched the disk");
    // ... and CubeCL's tuners get a directory of this process only, never an earlier one.
    let d2 = finish(
        probe_command(dir, "none", "8x64")
            .env(PROBE_CUBECL, "1")
            .output()
            .unwrap(),
    );
    let session = d2.value("cubecl_id").unwrap();
    assert!(session.contains("-session"), "{session}");
    // ... which is removed when the process exits: two runs without a fingerprint (D, D2)
    // leave nothing behind.
    assert_eq!(snapshot(dir), after_c, "D2 left files behind");
    assert_eq!(
        session_dirs(dir),
        Vec::<String>::new(),
        "D2 left its session directory"
    );

    // RUDA_AUTOTUNE=off: the default choice, no tuning, nothing written.
    let before = snapshot(dir);
    let off = finish(
        probe_command(dir, "Z", SHAPES)
            .env(ENV_AUTOTUNE, "off")
            .output()
            .unwrap(),
    );
    assert_eq!((off.passes(), off.runs()), (0, 0), "{}", off.stdout);
    assert_eq!(
        snapshot(dir),
        before,
        "RUDA_AUTOTUNE=off wrote to the cache"
    );
}

/// Each line of a cache file, parsed; `Err` for lines that are not JSON.
fn lines(path: &Path) -> Vec<Result<serde_json::Value, String>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).map_err(|_| l.to_string()))
        .collect()
}

#[test]
#[serial]
fn corrupt_cache_is_ignored_and_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fwd = ruda_file(dir, "X", "layer-norm-forward");
    let a = probe(dir, "X", SHAPES);
    assert_eq!(a.passes(), 4);
    let good = std::fs::read_to_string(&fwd).unwrap();
    assert_eq!(good.lines().count(), 2);

    // Garbage: every line replaced by something that is not an entry.
    std::fs::write(&fwd, "this is not json\n{\"key\": [1, 2\n\u{1}\u{2}\n").unwrap();
    let e = probe(dir, "X", SHAPES);
    assert!(e.stderr.contains("Corrupted cache file"), "{}", e.stderr);
    assert_eq!(
        e.passes(),
        2,
        "the two forward keys are tuned again: {}",
        e.stdout
    );
    let parsed = lines(&fwd);
    assert_eq!(parsed.iter().filter(|l| l.is_ok()).count(), 2, "{parsed:?}");
    let f = probe(dir, "X", SHAPES);
    assert_eq!(
        (f.passes(), f.runs()),
        (0, 0),
        "rebuilt cache reused: {}",
        f.stdout
    );

    // Truncated: the last entry cut in the middle (no newline), as an interrupted write.
    let text = std::fs::read_to_string(&fwd).unwrap();
    let last_start = text.trim_end().rfind('\n').map_or(0, |i| i + 1);
    let cut = last_start + (text.len() - last_start) / 2;
    std::fs::write(&fwd, &text[..cut]).unwrap();
    let g = probe(dir, "X", SHAPES);
    assert!(g.stderr.contains("cut off"), "{}", g.stderr);
    assert_eq!(
        g.passes(),
        1,
        "only the cut-off key is tuned again: {}",
        g.stdout
    );
    let parsed = lines(&fwd);
    let valid: Vec<_> = parsed.iter().filter_map(|l| l.as_ref().ok()).collect();
    let keys: std::collections::HashSet<String> =
        valid.iter().map(|v| v["key"].to_string()).collect();
    assert_eq!(keys.len(), 2, "{parsed:?}");
    let h = probe(dir, "X", SHAPES);
    assert_eq!((h.passes(), h.runs()), (0, 0), "{}", h.stdout);

    // The same repair for the caches of CubeCL's tuners (keyed by `CubeTuneId`).
    let run_cubecl = || {
        finish(
            probe_command(dir, "X", "8x64")
                .env(PROBE_CUBECL, "1")
                .output()
                .unwrap(),
        )
    };
    let first = run_cubecl();
    let cubecl_file = PathBuf::from(
        first
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix("PROBE file="))
            .find(|f| f.ends_with("ruda-probe.json.log"))
            .unwrap(),
    );
    let text = std::fs::read_to_string(&cubecl_file).unwrap();
    assert_eq!(text.lines().count(), 1);
    std::fs::write(&cubecl_file, &text[..text.len() / 2]).unwrap();
    let second = run_cubecl();
    assert!(second.stderr.contains("cut off"), "{}", second.stderr);
    let parsed = lines(&cubecl_file);
    assert_eq!(
        parsed.len(),
        2,
        "the fragment, then the new entry: {parsed:?}"
    );
    assert!(parsed[0].is_err() && parsed[1].is_ok(), "{parsed:?}");
}

#[test]
#[serial]
fn autotune_dir_that_cannot_be_applied_fails_loudly() {
    let tmp = tempfile::tempdir().unwrap();
    let output = probe_command(tmp.path(), "X", "8x64")
        .env(PROBE_PLAIN_FIRST, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("RUDA_AUTOTUNE_DIR") && stderr.contains("cannot be applied"),
        "{stderr}"
    );
    assert!(!tmp.path().join("cache").exists());
}

#[test]
#[serial]
fn concurrent_processes_share_one_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Two processes tune at once, one key in common (64x256).
    let p1 = probe_command(dir, "X", "64x256,16x512").spawn().unwrap();
    let p2 = probe_command(dir, "X", "64x256,8x1000").spawn().unwrap();
    let (o1, o2) = (
        p1.wait_with_output().unwrap(),
        p2.wait_with_output().unwrap(),
    );
    let (p1, p2) = (finish(o1), finish(o2));
    assert_eq!((p1.passes(), p2.passes()), (4, 4));
    for tuner in ["layer-norm-forward", "layer-norm-backward"] {
        let path = ruda_file(dir, "X", tuner);
        let parsed = lines(&path);
        assert!(parsed.iter().all(|l| l.is_ok()), "{tuner}: {parsed:?}");
        let keys: Vec<String> = parsed
            .iter()
            .map(|l| l.as_ref().unwrap()["key"].to_string())
            .collect();
        let unique: std::collections::HashSet<_> = keys.iter().collect();
        assert_eq!(unique.len(), 3, "{tuner}: three keys, each once: {keys:?}");
        assert_eq!(keys.len(), 3, "{tuner}: no key written twice: {keys:?}");
    }
    // A third process finds all three keys.
    let p3 = probe(dir, "X", "64x256,16x512,8x1000");
    assert_eq!((p3.passes(), p3.runs()), (0, 0), "{}", p3.stdout);
}

/// Without a fingerprint (so nothing on disk): the tuned path matches a forced variant on
/// shapes that take different candidates, odd `d` included, and the choices are in-process ones.
/// In a probe process: the settings are read once per process from its environment.
#[test]
#[serial]
fn tuned_results_match_a_forced_variant() {
    let tmp = tempfile::tempdir().unwrap();
    let run = probe(tmp.path(), "none", "1x1,3x7,200x96,5x3000,2x9000");
    assert!(run.passes() > 0, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("no fingerprint: ruda's results kept in memory only"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("layer-norm-forward ["),
        "{}",
        run.stdout
    );
}
