//! CPU time of this process's threads over a stretch of work, grouped by role: which stage of
//! the pipeline a host-bound training step saturates.
//!
//! A training step on `Ruda` passes through three kinds of threads: the training thread builds
//! each operation's description and hands it over; burn-fusion's device-service thread
//! (`DSU-<type>-<index>`, cubecl-common's upstream runner) groups operations into fused kernels
//! and launches them; CubeCL's device-service thread (`DSD-<type>-<index>`, the downstream runner)
//! compiles, binds and launches each kernel on the driver. Their queues are bounded (32 tasks), so
//! the slowest stage sets the pace and the others wait: the thread whose CPU time per step is
//! close to the step's wall time is the one to make cheaper.
//!
//! Linux only (`/proc/self/task`); elsewhere [`ThreadCpu::snapshot`] is an error.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// CPU time (user + system) of every live thread of this process at one instant.
#[derive(Clone, Debug, Default)]
pub struct ThreadCpu {
    /// Thread id to (name, CPU time).
    threads: BTreeMap<u32, (String, Duration)>,
}

/// The CPU time each role of thread spent between two [`ThreadCpu`] snapshots.
#[derive(Clone, Debug)]
pub struct CpuByRole {
    /// Role name to (threads seen, CPU time).
    roles: BTreeMap<&'static str, (usize, Duration)>,
    /// Wall time of the window, for the "% of one core" column.
    wall: Duration,
}

impl ThreadCpu {
    /// Reads every thread's CPU time from `/proc/self/task/<tid>/stat`.
    pub fn snapshot() -> std::io::Result<Self> {
        let ticks_per_second = clock_ticks_per_second();
        let mut threads = BTreeMap::new();
        for (tid, stat) in task_files("stat")? {
            let Some((name, ticks)) = parse_stat(&stat) else {
                continue;
            };
            let cpu = Duration::from_secs_f64(ticks as f64 / ticks_per_second as f64);
            threads.insert(tid, (name, cpu));
        }
        Ok(Self { threads })
    }

    /// CPU time spent per role since `earlier`, over `wall` of wall-clock time. Threads started
    /// after `earlier` count from zero; threads that ended in between are not seen.
    pub fn since(&self, earlier: &ThreadCpu, wall: Duration) -> CpuByRole {
        let mut roles: BTreeMap<&'static str, (usize, Duration)> = BTreeMap::new();
        for (tid, (name, cpu)) in &self.threads {
            let before = earlier
                .threads
                .get(tid)
                .filter(|(earlier_name, _)| earlier_name == name)
                .map_or(Duration::ZERO, |(_, cpu)| *cpu);
            let role = roles.entry(role_of(name)).or_default();
            role.0 += 1;
            role.1 += cpu.saturating_sub(before);
        }
        CpuByRole { roles, wall }
    }

    /// The `n` threads that spent the most CPU time since `earlier`, busiest first: name, thread
    /// id and CPU time. Where the roles lump threads together (`other`: loader workers, burn-train's
    /// metrics and renderer threads, rayon), this names them.
    pub fn busiest_since(&self, earlier: &ThreadCpu, n: usize) -> Vec<(String, u32, Duration)> {
        let mut threads: Vec<(String, u32, Duration)> = self
            .threads
            .iter()
            .map(|(tid, (name, cpu))| {
                let before = earlier
                    .threads
                    .get(tid)
                    .filter(|(earlier_name, _)| earlier_name == name)
                    .map_or(Duration::ZERO, |(_, cpu)| *cpu);
                (name.clone(), *tid, cpu.saturating_sub(before))
            })
            .filter(|(_, _, cpu)| !cpu.is_zero())
            .collect();
        threads.sort_by_key(|thread| std::cmp::Reverse(thread.2));
        threads.truncate(n);
        threads
    }
}

impl CpuByRole {
    /// CPU time of `role` (one of [`ROLES`]) divided by `steps`.
    pub fn per_step(&self, role: &str, steps: usize) -> Duration {
        self.roles
            .get(role)
            .map_or(Duration::ZERO, |(_, cpu)| *cpu / steps.max(1) as u32)
    }

    /// One line per role that used CPU: its CPU time per step over `steps` and its share of one
    /// core over the window.
    pub fn table(&self, steps: usize) -> String {
        let mut out = String::new();
        for role in ROLES {
            let Some((count, cpu)) = self.roles.get(role) else {
                continue;
            };
            if cpu.is_zero() {
                continue;
            }
            let share = cpu.as_secs_f64() / self.wall.as_secs_f64().max(1e-9) * 100.0;
            out.push_str(&format!(
                "  {role:<10} {count:>3} thread(s) {:>9.2} ms/step {share:>6.1}% of one core\n",
                cpu.as_secs_f64() * 1e3 / steps.max(1) as f64
            ));
        }
        out
    }
}

impl fmt::Display for CpuByRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.table(1))
    }
}

/// The roles threads are grouped into, in the order [`CpuByRole::table`] prints them.
pub const ROLES: [&str; 5] = ["training", "fusion", "cubecl", "driver", "other"];

/// The role of a thread by its name: `fusion` for cubecl-common's upstream device-service
/// runner (burn-fusion's server), `cubecl` for the downstream one (CubeCL's compute server),
/// `driver` for threads the GPU driver or Vulkan implementation starts, `training` for the
/// process's main thread and burn-train's learner, `other` for the rest (loader workers, the
/// metrics thread, rayon).
pub(crate) fn role_of(name: &str) -> &'static str {
    if name.starts_with("DSU-") {
        "fusion"
    } else if name.starts_with("DSD-") {
        "cubecl"
    } else if name.starts_with("cuda")
        || name.starts_with("llvmpipe")
        || name.starts_with("lavapipe")
    {
        "driver"
    } else if is_main_thread_name(name) {
        "training"
    } else {
        "other"
    }
}

/// The main thread carries the executable's name (at most 15 bytes in `comm`).
fn is_main_thread_name(name: &str) -> bool {
    let Some(exe) = std::env::current_exe().ok().and_then(|path| {
        path.file_name()
            .and_then(|name| name.to_str())
            .map(str::to_owned)
    }) else {
        return false;
    };
    let truncated: String = exe.chars().take(15).collect();
    name == truncated || name == "main"
}

/// Every live thread's id and name (`/proc/self/task/<tid>/comm`).
pub(crate) fn thread_names() -> std::io::Result<Vec<(u32, String)>> {
    Ok(task_files("comm")?
        .into_iter()
        .map(|(tid, name)| (tid, name.trim_end().to_owned()))
        .collect())
}

/// Every live thread's id and the text of its `/proc/self/task/<tid>/<file>`. A thread that
/// ends between the listing and the read is left out.
fn task_files(file: &str) -> std::io::Result<Vec<(u32, String)>> {
    let mut threads = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task")? {
        let entry = entry?;
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(text) = std::fs::read_to_string(entry.path().join(file)) {
            threads.push((tid, text));
        }
    }
    Ok(threads)
}

/// Name and user + system clock ticks from one `/proc/<pid>/task/<tid>/stat` line. The name is
/// between the first '(' and the last ')' (it may hold spaces or parentheses).
fn parse_stat(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_owned();
    // After ") ": state, ppid, ..., utime is the 12th field and stime the 13th.
    let mut fields = stat.get(close + 2..)?.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((name, utime + stime))
}

fn clock_ticks_per_second() -> u64 {
    // Linux has reported 100 ticks a second to user space (USER_HZ) on every architecture for
    // decades; `getconf CLK_TCK` says so. Reading it would need libc for one constant.
    100
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_line_with_spaces_and_parentheses_in_the_name() {
        let line = "4242 (DSU-1 (x) y) S 1 2 3 4 5 6 7 8 9 10 250 31 0 0 20 0 1 0";
        assert_eq!(parse_stat(line), Some(("DSU-1 (x) y".to_owned(), 281)));
    }

    #[test]
    fn roles_by_thread_name() {
        assert_eq!(role_of("DSU-3-0"), "fusion");
        assert_eq!(role_of("DSD-3-0"), "cubecl");
        assert_eq!(role_of("llvmpipe-1"), "driver");
        assert_eq!(role_of("tokio-runtime-w"), "other");
    }

    #[test]
    fn a_busy_thread_shows_its_cpu_time() {
        let before = ThreadCpu::snapshot().expect("/proc/self/task is readable on Linux");
        let start = std::time::Instant::now();
        let busy = std::thread::Builder::new()
            .name("DSU-9-9".into())
            .spawn(|| {
                let mut x = 0u64;
                let until = std::time::Instant::now() + Duration::from_millis(300);
                while std::time::Instant::now() < until {
                    x = x.wrapping_mul(31).wrapping_add(7);
                    std::hint::black_box(x);
                }
                // Snapshot before the thread ends, so that it is still listed.
                ThreadCpu::snapshot().expect("readable")
            })
            .unwrap();
        let after = busy.join().unwrap();
        let by_role = after.since(&before, start.elapsed());
        let fusion = by_role.per_step("fusion", 1);
        assert!(
            fusion >= Duration::from_millis(150),
            "a thread spinning for 300 ms was charged {fusion:?}"
        );
    }
}
