//! Reading a training text, gzipped or plain, and the shipped Shakespeare.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The shipped text: seven Shakespeare plays (public domain), `data/shakespeare/plays.txt.gz`.
pub fn shipped_shakespeare() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/shakespeare/plays.txt.gz")
}

/// Reads a UTF-8 text file, gunzipping it when it starts with the gzip magic bytes. Errors name
/// the file.
pub fn read_text(path: impl AsRef<Path>) -> Result<String, String> {
    let path = path.as_ref();
    let raw = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(raw.len() * 3);
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| format!("cannot gunzip {}: {e}", path.display()))?;
        out
    } else {
        raw
    };
    String::from_utf8(bytes).map_err(|e| format!("{} is not UTF-8 text: {e}", path.display()))
}
