//! Where each thread of this process spends its time, on machines without `perf` or `gdb` (the
//! GPU machine has neither): a sampling profiler of the process's own threads.
//!
//! [`thread_cpu`](crate::thread_cpu) says how much CPU each role of thread used, but not what for:
//! a thread that spins on a full queue (cubecl-common's device-service channel spins before it
//! sleeps) shows the same CPU time as one that works. This sampler interrupts the chosen threads
//! about every `interval` with `SIGPROF` (`tgkill`) and records, in the signal handler, the
//! interrupted instruction address and up to [`CALLERS`] return-address candidates found by
//! scanning the stack above it for words that point into the executable's code (frame pointers
//! are off in release builds, so there is no chain to walk). The raw file names each code mapping,
//! so that the addresses can be resolved afterwards against the same executable before `strip`
//! (`benches/device/symbolize_samples.py`).
//!
//! What must hold: the handler touches only preallocated atomics and memory proven readable (the
//! stack scan stays inside the mapping, listed before sampling starts, that holds the interrupted
//! stack pointer), so it is async-signal-safe. One sampler runs at a time; a second `start` is an
//! error. Linux on x86-64 only; elsewhere `start` is an error.

use std::fmt::Write as _;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Return-address candidates kept per sample.
pub const CALLERS: usize = 6;
/// Samples kept per run; later ones are counted as dropped.
const CAPACITY: usize = 1 << 16;
/// Stack words scanned above the interrupted stack pointer (4 KiB).
const SCAN_WORDS: usize = 512;
/// Writable mappings remembered for the stack scan.
const MAX_RANGES: usize = 16384;

/// One sample: thread id, interrupted address, return-address candidates (0 when fewer).
struct Slot {
    tid: AtomicU64,
    pc: AtomicU64,
    callers: [AtomicU64; CALLERS],
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SLOT: Slot = Slot {
    tid: AtomicU64::new(0),
    pc: AtomicU64::new(0),
    callers: [const { AtomicU64::new(0) }; CALLERS],
};
static SLOTS: [Slot; CAPACITY] = [EMPTY_SLOT; CAPACITY];
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// Set while a sampler runs: the handler records only then.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Guards against two samplers at once.
static IN_USE: AtomicBool = AtomicBool::new(false);
/// The executable's code, `[start, end)`: what a return-address candidate must point into.
static TEXT: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
/// Readable and writable mappings (thread stacks among them), sorted, `[start, end)` pairs.
static RANGES: [[AtomicU64; 2]; MAX_RANGES] =
    [const { [const { AtomicU64::new(0) }; 2] }; MAX_RANGES];
static RANGE_COUNT: AtomicUsize = AtomicUsize::new(0);

/// A thread chosen for sampling.
#[derive(Clone, Debug)]
pub struct SampledThread {
    pub tid: u32,
    pub name: String,
    pub role: &'static str,
}

/// A running sampler; [`ThreadSampler::finish`] stops it and returns the samples.
pub struct ThreadSampler {
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
    threads: Vec<SampledThread>,
    maps: String,
}

/// What a run of the sampler recorded.
pub struct Samples {
    pub threads: Vec<SampledThread>,
    /// `(tid, pc, callers)` in the order taken.
    pub samples: Vec<(u32, u64, [u64; CALLERS])>,
    /// Samples that did not fit.
    pub dropped: usize,
    /// The executable-code lines of `/proc/self/maps` (`start-end perms offset ... path`).
    pub maps: String,
}

impl ThreadSampler {
    /// Starts sampling every live thread whose role ([`crate::thread_cpu`]'s: `training`,
    /// `fusion`, `cubecl`, ...) is in `roles`, each about every `interval`.
    pub fn start(roles: &[&str], interval: Duration) -> io::Result<Self> {
        if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the thread sampler needs Linux on x86-64",
            ));
        }
        if IN_USE.swap(true, Ordering::SeqCst) {
            return Err(io::Error::other("a thread sampler is already running"));
        }
        match Self::start_inner(roles, interval) {
            Ok(sampler) => Ok(sampler),
            Err(err) => {
                IN_USE.store(false, Ordering::SeqCst);
                Err(err)
            }
        }
    }

    fn start_inner(roles: &[&str], interval: Duration) -> io::Result<Self> {
        let threads: Vec<SampledThread> = crate::thread_cpu::thread_names()?
            .into_iter()
            .filter_map(|(tid, name)| {
                let role = crate::thread_cpu::role_of(&name);
                roles
                    .contains(&role)
                    .then_some(SampledThread { tid, name, role })
            })
            .collect();
        if threads.is_empty() {
            return Err(io::Error::other(format!(
                "no live thread has a role among {roles:?}"
            )));
        }
        let maps = std::fs::read_to_string("/proc/self/maps")?;
        let exe = std::env::current_exe()?;
        let exe = exe.to_string_lossy();
        let mut code = String::new();
        let mut writable = Vec::new();
        let mut text = (0u64, 0u64);
        for line in maps.lines() {
            let mut fields = line.split_whitespace();
            let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
                continue;
            };
            let Some((start, end)) = range.split_once('-').and_then(|(a, b)| {
                Some((
                    u64::from_str_radix(a, 16).ok()?,
                    u64::from_str_radix(b, 16).ok()?,
                ))
            }) else {
                continue;
            };
            let path = line.split_whitespace().nth(5).unwrap_or("");
            if perms.starts_with("r-x") {
                code.push_str(line);
                code.push('\n');
                if path == exe && text == (0, 0) {
                    text = (start, end);
                }
            } else if perms.starts_with("rw") {
                writable.push((start, end));
            }
        }
        writable.sort_unstable();
        writable.truncate(MAX_RANGES);
        for (slot, (start, end)) in RANGES.iter().zip(&writable) {
            slot[0].store(*start, Ordering::Relaxed);
            slot[1].store(*end, Ordering::Relaxed);
        }
        RANGE_COUNT.store(writable.len(), Ordering::Relaxed);
        TEXT[0].store(text.0, Ordering::Relaxed);
        TEXT[1].store(text.1, Ordering::Relaxed);
        NEXT.store(0, Ordering::SeqCst);
        install_handler()?;
        ACTIVE.store(true, Ordering::SeqCst);

        let stop = Arc::new(AtomicBool::new(false));
        let tids: Vec<u32> = threads.iter().map(|t| t.tid).collect();
        let ticker = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("thread-sampler".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        for &tid in &tids {
                            signal_thread(tid);
                        }
                        std::thread::sleep(interval);
                    }
                })?
        };
        Ok(Self {
            stop,
            ticker: Some(ticker),
            threads,
            maps: code,
        })
    }

    /// Stops sampling and returns what was recorded.
    pub fn finish(mut self) -> Samples {
        self.stop_ticker();
        let taken = NEXT.load(Ordering::SeqCst);
        let kept = taken.min(CAPACITY);
        let samples = SLOTS[..kept]
            .iter()
            .filter(|slot| slot.pc.load(Ordering::Relaxed) != 0)
            .map(|slot| {
                (
                    slot.tid.load(Ordering::Relaxed) as u32,
                    slot.pc.load(Ordering::Relaxed),
                    std::array::from_fn(|i| slot.callers[i].load(Ordering::Relaxed)),
                )
            })
            .collect();
        // Cleared, so that a slot the next run reserves but has not yet written reads as empty.
        for slot in &SLOTS[..kept] {
            slot.tid.store(0, Ordering::Relaxed);
            slot.pc.store(0, Ordering::Relaxed);
            for caller in &slot.callers {
                caller.store(0, Ordering::Relaxed);
            }
        }
        Samples {
            threads: std::mem::take(&mut self.threads),
            samples,
            dropped: taken - kept,
            maps: std::mem::take(&mut self.maps),
        }
    }

    fn stop_ticker(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            self.stop.store(true, Ordering::Relaxed);
            let _ = ticker.join();
            // A signal already sent may still land; the handler checks ACTIVE first.
            ACTIVE.store(false, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(5));
            IN_USE.store(false, Ordering::SeqCst);
        }
    }
}

impl Drop for ThreadSampler {
    fn drop(&mut self) {
        self.stop_ticker();
    }
}

impl Samples {
    /// The raw file `benches/device/symbolize_samples.py` reads: `# map` lines (code mappings),
    /// `# thread <tid> <role> <name>` lines, then one line per sample, `tid pc caller...` in hex.
    pub fn to_text(&self) -> String {
        let mut out = String::from("# thread_sampler 1\n");
        for line in self.maps.lines() {
            let _ = writeln!(out, "# map {line}");
        }
        for t in &self.threads {
            let _ = writeln!(out, "# thread {} {} {}", t.tid, t.role, t.name);
        }
        let _ = writeln!(out, "# dropped {}", self.dropped);
        for (tid, pc, callers) in &self.samples {
            let _ = write!(out, "{tid} {pc:x}");
            for c in callers.iter().filter(|c| **c != 0) {
                let _ = write!(out, " {c:x}");
            }
            out.push('\n');
        }
        out
    }

    /// Writes [`Samples::to_text`] to `path`.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        std::fs::write(path, self.to_text())
            .map_err(|err| io::Error::new(err.kind(), format!("writing {}: {err}", path.display())))
    }

    /// Samples per role, for a one-line summary.
    pub fn count_by_role(&self) -> Vec<(&'static str, usize)> {
        let mut counts: Vec<(&'static str, usize)> = Vec::new();
        for (tid, ..) in &self.samples {
            let role = self
                .threads
                .iter()
                .find(|t| t.tid == *tid)
                .map_or("other", |t| t.role);
            match counts.iter_mut().find(|(r, _)| *r == role) {
                Some((_, n)) => *n += 1,
                None => counts.push((role, 1)),
            }
        }
        counts
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn install_handler() -> io::Result<()> {
    // SAFETY: installs a handler that only reads its own context and stack and writes atomics.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sample as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGPROF, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn install_handler() -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "the thread sampler needs Linux on x86-64",
    ))
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn signal_thread(tid: u32) {
    // SAFETY: plain syscalls; a thread that has ended makes tgkill fail with ESRCH, ignored.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            libc::getpid(),
            tid as libc::c_int,
            libc::SIGPROF,
        );
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn signal_thread(_tid: u32) {}

/// The end of the writable mapping that holds `address`, if one was listed.
fn mapping_end(address: u64) -> Option<u64> {
    let count = RANGE_COUNT.load(Ordering::Relaxed);
    let (mut lo, mut hi) = (0usize, count);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let start = RANGES[mid][0].load(Ordering::Relaxed);
        let end = RANGES[mid][1].load(Ordering::Relaxed);
        if address < start {
            hi = mid;
        } else if address >= end {
            lo = mid + 1;
        } else {
            return Some(end);
        }
    }
    None
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
extern "C" fn on_sample(
    _signal: libc::c_int,
    _info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    if !ACTIVE.load(Ordering::Relaxed) || context.is_null() {
        return;
    }
    // SAFETY: the kernel passes the interrupted thread's context to an SA_SIGINFO handler.
    let (pc, sp) = unsafe {
        let context = &*(context as *const libc::ucontext_t);
        (
            context.uc_mcontext.gregs[libc::REG_RIP as usize] as u64,
            context.uc_mcontext.gregs[libc::REG_RSP as usize] as u64,
        )
    };
    let index = NEXT.fetch_add(1, Ordering::Relaxed);
    let Some(slot) = SLOTS.get(index) else {
        return;
    };
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u64;
    let (text_start, text_end) = (
        TEXT[0].load(Ordering::Relaxed),
        TEXT[1].load(Ordering::Relaxed),
    );
    let mut found = 0;
    if let Some(end) = mapping_end(sp) {
        let words = ((end - sp) / 8).min(SCAN_WORDS as u64);
        for i in 0..words {
            // SAFETY: `sp + 8 i` lies inside a mapping listed as readable and writable when the
            // sampler started; a thread stack stays mapped while its thread lives.
            let word = unsafe { std::ptr::read_volatile((sp + 8 * i) as *const u64) };
            if word >= text_start && word < text_end {
                slot.callers[found].store(word, Ordering::Relaxed);
                found += 1;
                if found == CALLERS {
                    break;
                }
            }
        }
    }
    slot.tid.store(tid, Ordering::Relaxed);
    slot.pc.store(pc, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_is_sampled_inside_this_executable() {
        // Other tests of this crate may run `DSU-*` threads at the same time: they may be sampled
        // too, and only this test's thread is checked.
        const NAME: &str = "DSU-sample-test";
        let done = Arc::new(AtomicBool::new(false));
        let worker = {
            let done = done.clone();
            std::thread::Builder::new()
                .name(NAME.into())
                .spawn(move || {
                    let mut x = 0u64;
                    while !done.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                    x
                })
                .unwrap()
        };
        std::thread::sleep(Duration::from_millis(20));
        let sampler = ThreadSampler::start(&["fusion"], Duration::from_micros(500)).unwrap();
        assert!(ThreadSampler::start(&["fusion"], Duration::from_millis(1)).is_err());
        std::thread::sleep(Duration::from_millis(200));
        let samples = sampler.finish();
        // Once the first has finished, another may start.
        drop(
            ThreadSampler::start(&["fusion"], Duration::from_millis(1))
                .unwrap()
                .finish(),
        );
        done.store(true, Ordering::Relaxed);
        worker.join().unwrap();
        let ours = samples
            .threads
            .iter()
            .find(|t| t.name == NAME)
            .unwrap_or_else(|| panic!("{NAME} not among {:?}", samples.threads));
        assert_eq!(ours.role, "fusion");
        let pcs: Vec<u64> = samples
            .samples
            .iter()
            .filter(|(tid, ..)| *tid == ours.tid)
            .map(|(_, pc, _)| *pc)
            .collect();
        assert!(pcs.len() >= 20, "{} samples", pcs.len());
        // The worker spins in this executable's code: most of its samples land there.
        let (start, end) = (
            TEXT[0].load(Ordering::Relaxed),
            TEXT[1].load(Ordering::Relaxed),
        );
        let inside = pcs.iter().filter(|pc| (start..end).contains(*pc)).count();
        assert!(inside * 2 > pcs.len(), "{inside} of {}", pcs.len());
        let text = samples.to_text();
        assert!(text.contains(&format!(" fusion {NAME}")), "{text}");
        assert!(text.lines().any(|l| l.starts_with("# map ")));
    }
}
