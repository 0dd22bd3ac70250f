//! The autotune cache files on disk: where they are, and the one repair CubeCL does not make.
//!
//! CubeCL's cache (`cubecl-common`'s `Cache`) is a JSON-lines file, appended under a lock file
//! (`<file>.lock`, created exclusively, holding a timestamp; stale after 30 s). On load it
//! skips lines that do not parse, with a `Corrupted cache file` warning, and then tunes those
//! keys again. A last line without its newline (a write cut off by a crash or a full disk) is
//! not a line yet: it is silently skipped, and the next entry appended after it would be glued
//! to it and lost too. Before a cache is used, [`repair`] ends such a fragment with a newline
//! (under the same lock), so it becomes one ignored line and new entries land on their own.
//!
//! CubeCL also creates a missing cache file with `File::create`, which truncates: two processes
//! that both find the file missing could race. For ruda's own caches [`prepare`] creates the
//! file without truncating before CubeCL opens it.

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// The cache problems of this process (a directory that cannot be created or written), each
/// logged once as a warning when it happens.
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Logs `message` as a warning (once per distinct message) and keeps it for [`warnings`].
pub(crate) fn warn(message: String) {
    let mut warnings = WARNINGS.lock().unwrap_or_else(|e| e.into_inner());
    if !warnings.contains(&message) {
        log::warn!("{message}");
        warnings.push(message);
    }
}

/// Every cache problem of this process so far: the run goes on without the cache concerned.
pub fn warnings() -> Vec<String> {
    WARNINGS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Whether files can be created in `dir` (created if missing): a probe file is written and
/// removed. Root may write where permissions say it may not; only an actual write tells.
pub(crate) fn writable(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let probe = dir.join(format!(".ruda-write-probe-{}", std::process::id()));
    fs::write(&probe, b"").map_err(|err| format!("cannot write in {}: {err}", dir.display()))?;
    let _ = fs::remove_file(&probe);
    Ok(())
}

/// The directory of the autotune caches of `cache_id` under `root`, as CubeCL lays it out:
/// `<root>/autotune/<cubecl version>/<cache id>`.
pub(crate) fn cache_dir(root: &Path, cache_id: &str) -> PathBuf {
    root.join("autotune")
        .join(crate::version::CUBECL_VERSION)
        .join(sanitize(cache_id))
}

/// The file of tuner `name` for `cache_id`.
pub(crate) fn cache_file(root: &Path, cache_id: &str, name: &str) -> PathBuf {
    cache_dir(root, cache_id).join(format!("{}.json.log", sanitize(name)))
}

/// CubeCL replaces characters that are not allowed in file names (`<`, `>`, ...) by `_`.
fn sanitize(segment: &str) -> String {
    segment
        .chars()
        .map(|c| match c {
            '<' | '>' | ':' | '"' | '/' | '\\' | '|' | '?' | '*' => '_',
            c if c.is_control() => '_',
            c => c,
        })
        .collect()
}

/// Creates `path` (and its directory) if missing, without truncating an existing file, then
/// [`repair`]s it.
pub(crate) fn prepare(path: &Path) {
    if let Some(parent) = path.parent()
        && let Err(err) = fs::create_dir_all(parent)
    {
        warn(format!(
            "autotune cache: cannot create {}: {err}; tuning results are kept in memory for \
             this run",
            parent.display()
        ));
        return;
    }
    if let Err(err) = OpenOptions::new().create(true).append(true).open(path) {
        warn(format!(
            "autotune cache: cannot create {}: {err}; tuning results are kept in memory for \
             this run",
            path.display()
        ));
        return;
    }
    repair(path);
}

/// Every `*.json.log` file in `dir` (none when it does not exist).
pub(crate) fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".json.log"))
        .collect();
    files.sort();
    files
}

/// The entries stored so far in every autotune cache under `root` (ruda's and CubeCL's, every
/// device, this CubeCL version): one per line of each cache file. Growth while a program runs
/// counts the kernel shapes tuned meanwhile, since each result is appended when it is found.
pub(crate) fn stored_entries(root: &Path) -> usize {
    let Ok(dirs) = fs::read_dir(root.join("autotune").join(crate::version::CUBECL_VERSION)) else {
        return 0;
    };
    dirs.flatten()
        .flat_map(|dir| files_in(&dir.path()))
        .filter_map(|file| fs::read(file).ok())
        .map(|bytes| bytes.iter().filter(|&&b| b == b'\n').count())
        .sum()
}

/// Ends a cut-off last entry with a newline, so that CubeCL ignores it (with a warning) and
/// appends the next entry on a line of its own. Does nothing to a well-formed file.
pub(crate) fn repair(path: &Path) {
    if ends_with_newline(path).unwrap_or(true) {
        return;
    }
    let Some(lock) = FileLock::acquire(path) else {
        log::warn!(
            "autotune cache {}: its last entry is cut off but the file stays locked by another \
             process; not repaired",
            path.display()
        );
        return;
    };
    // Another process may have repaired it while we waited.
    if ends_with_newline(path).unwrap_or(true) {
        return;
    }
    let appended = OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(b"\n"));
    drop(lock);
    match appended {
        Ok(()) => log::warn!(
            "autotune cache {}: the last entry was cut off (an interrupted write); it is ignored \
             and its key will be tuned again",
            path.display()
        ),
        Err(err) => log::warn!("autotune cache {}: cannot repair: {err}", path.display()),
    }
}

/// `None` when the file is missing or empty.
fn ends_with_newline(path: &Path) -> Option<bool> {
    let mut file = fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    if len == 0 {
        return None;
    }
    file.seek(SeekFrom::Start(len - 1)).ok()?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last).ok()?;
    Some(last[0] == b'\n')
}

/// CubeCL's lock protocol: `<file>.lock` created exclusively, holding the JSON timestamp of its
/// creation, removed on release; a lock older than 30 s is considered abandoned.
struct FileLock {
    path: PathBuf,
}

impl FileLock {
    const STALE: Duration = Duration::from_secs(30);

    fn acquire(file: &Path) -> Option<Self> {
        let mut name = file.file_name()?.to_os_string();
        name.push(".lock");
        let path = file.with_file_name(name);
        let start = SystemTime::now();
        loop {
            match OpenOptions::new().create_new(true).write(true).open(&path) {
                Ok(mut lock) => {
                    let stamp = serde_json::to_vec(&SystemTime::now()).ok()?;
                    lock.write_all(&stamp).ok()?;
                    return Some(Self { path });
                }
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = fs::read_to_string(&path)
                        .ok()
                        .and_then(|s| serde_json::from_str::<SystemTime>(&s).ok())
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > Self::STALE);
                    if stale {
                        fs::remove_file(&path).ok();
                        continue;
                    }
                    if start.elapsed().unwrap_or_default() > Self::STALE {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(30));
                }
                Err(_) => return None,
            }
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        fs::remove_file(&self.path).ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_entries_counts_the_lines_of_every_cache_file() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(stored_entries(root.path()), 0, "no cache yet");
        let ruda = cache_file(root.path(), "ruda-fp1", "layer_norm");
        let cubecl = cache_file(root.path(), "device-3-0-wgpu-fp1", "matmul");
        fs::create_dir_all(ruda.parent().unwrap()).unwrap();
        fs::create_dir_all(cubecl.parent().unwrap()).unwrap();
        fs::write(&ruda, "{\"a\":1}\n{\"a\":2}\n").unwrap();
        // A cut-off last entry is not an entry yet.
        fs::write(&cubecl, "{\"b\":1}\n{\"b\":").unwrap();
        fs::write(cubecl.with_extension("lock"), "123\n").unwrap();
        assert_eq!(stored_entries(root.path()), 3);
    }
}
