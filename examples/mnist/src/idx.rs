//! The IDX file format of MNIST (`train-images-idx3-ubyte` and friends), gzipped or not.
//!
//! An IDX file is a 4-byte magic number `0x00 0x00 <type> <rank>` (type `0x08` = unsigned
//! bytes), `rank` big-endian `u32` dimensions, then the data, row-major. MNIST images are rank 3
//! (`count x rows x cols`), labels rank 1. Gzipped files (as MNIST is distributed) are
//! recognised by their content, not their name.
//!
//! Every failure is an [`IdxError`] naming the file and saying what is wrong: a missing file, a
//! wrong magic number, a file shorter (truncated) or longer than its header says, labels and
//! images of different counts, a label that is not a digit.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The magic number of an IDX file of unsigned bytes with three dimensions (images).
pub const IMAGES_MAGIC: u32 = 0x0000_0803;
/// The magic number of an IDX file of unsigned bytes with one dimension (labels).
pub const LABELS_MAGIC: u32 = 0x0000_0801;

/// Why an IDX file or an MNIST split could not be read.
#[derive(Debug)]
pub enum IdxError {
    /// The file could not be read (missing, unreadable, or a corrupt gzip stream).
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// None of the usual names of a split's file exists in the directory.
    Missing {
        /// The directory searched.
        dir: PathBuf,
        /// The names tried.
        tried: Vec<String>,
    },
    /// The first four bytes are not the expected magic number.
    BadMagic {
        /// The file.
        path: PathBuf,
        /// The magic number found.
        found: u32,
        /// The magic number expected.
        expected: u32,
    },
    /// The file ends before the header or the data it announces.
    Truncated {
        /// The file.
        path: PathBuf,
        /// Bytes the header announces (header included).
        expected: usize,
        /// Bytes present.
        found: usize,
    },
    /// The file has bytes after the data its header announces.
    TrailingBytes {
        /// The file.
        path: PathBuf,
        /// Bytes the header announces (header included).
        expected: usize,
        /// Bytes present.
        found: usize,
    },
    /// The label file and the image file hold different numbers of items.
    CountMismatch {
        /// The image file.
        images: PathBuf,
        /// Number of images.
        image_count: usize,
        /// The label file.
        labels: PathBuf,
        /// Number of labels.
        label_count: usize,
    },
    /// A label is not a digit 0..=9.
    BadLabel {
        /// The file.
        path: PathBuf,
        /// Index of the label.
        index: usize,
        /// Its value.
        value: u8,
    },
}

impl fmt::Display for IdxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdxError::Io { path, source } => {
                write!(f, "cannot read IDX file {}: {source}", path.display())
            }
            IdxError::Missing { dir, tried } => write!(
                f,
                "no MNIST file in {}: tried {} (standard MNIST IDX files, gzipped or not)",
                dir.display(),
                tried.join(", ")
            ),
            IdxError::BadMagic {
                path,
                found,
                expected,
            } => write!(
                f,
                "{}: wrong magic number 0x{found:08x}, expected 0x{expected:08x} (an IDX file of \
unsigned bytes with {} dimension(s)); is this an MNIST {} file?",
                path.display(),
                expected & 0xff,
                if *expected == IMAGES_MAGIC {
                    "image"
                } else {
                    "label"
                }
            ),
            IdxError::Truncated {
                path,
                expected,
                found,
            } => write!(
                f,
                "{}: truncated IDX file: its header announces {expected} bytes, it has {found}",
                path.display()
            ),
            IdxError::TrailingBytes {
                path,
                expected,
                found,
            } => write!(
                f,
                "{}: IDX file longer than its header says: {expected} bytes announced, {found} \
present",
                path.display()
            ),
            IdxError::CountMismatch {
                images,
                image_count,
                labels,
                label_count,
            } => write!(
                f,
                "label and image counts differ: {} has {label_count} labels, {} has \
{image_count} images",
                labels.display(),
                images.display()
            ),
            IdxError::BadLabel { path, index, value } => write!(
                f,
                "{}: label {index} is {value}, not a digit 0..=9",
                path.display()
            ),
        }
    }
}

impl std::error::Error for IdxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            IdxError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Images of an IDX rank-3 file: `count` images of `rows x cols` bytes, row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxImages {
    /// Number of images.
    pub count: usize,
    /// Rows of each image.
    pub rows: usize,
    /// Columns of each image.
    pub cols: usize,
    /// `count * rows * cols` pixel values, 0 (background) to 255.
    pub pixels: Vec<u8>,
}

impl IdxImages {
    /// The pixels of image `index`.
    pub fn image(&self, index: usize) -> &[u8] {
        let size = self.rows * self.cols;
        &self.pixels[index * size..(index + 1) * size]
    }
}

/// Reads a whole file, gunzipping it when it starts with the gzip magic bytes.
pub fn read_maybe_gz(path: &Path) -> Result<Vec<u8>, IdxError> {
    let io = |source| IdxError::Io {
        path: path.to_path_buf(),
        source,
    };
    let raw = std::fs::read(path).map_err(io)?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(raw.len() * 4);
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(io)?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Checks the magic number and the length, and returns the dimensions and the data.
fn parse<'a>(bytes: &'a [u8], path: &Path, magic: u32) -> Result<(Vec<usize>, &'a [u8]), IdxError> {
    let truncated = |expected| IdxError::Truncated {
        path: path.to_path_buf(),
        expected,
        found: bytes.len(),
    };
    if bytes.len() < 4 {
        return Err(truncated(4));
    }
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    let found = be(0);
    if found != magic {
        return Err(IdxError::BadMagic {
            path: path.to_path_buf(),
            found,
            expected: magic,
        });
    }
    let rank = (magic & 0xff) as usize;
    let header = 4 + 4 * rank;
    if bytes.len() < header {
        return Err(truncated(header));
    }
    let dims: Vec<usize> = (0..rank).map(|i| be(4 + 4 * i) as usize).collect();
    let expected = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .and_then(|n| n.checked_add(header))
        .unwrap_or(usize::MAX);
    if bytes.len() < expected {
        return Err(truncated(expected));
    }
    if bytes.len() > expected {
        return Err(IdxError::TrailingBytes {
            path: path.to_path_buf(),
            expected,
            found: bytes.len(),
        });
    }
    Ok((dims, &bytes[header..]))
}

/// Parses the bytes of an IDX image file (`path` names it in errors).
pub fn parse_images(bytes: &[u8], path: &Path) -> Result<IdxImages, IdxError> {
    let (dims, data) = parse(bytes, path, IMAGES_MAGIC)?;
    Ok(IdxImages {
        count: dims[0],
        rows: dims[1],
        cols: dims[2],
        pixels: data.to_vec(),
    })
}

/// Parses the bytes of an IDX label file (`path` names it in errors); labels must be digits.
pub fn parse_labels(bytes: &[u8], path: &Path) -> Result<Vec<u8>, IdxError> {
    let (_, data) = parse(bytes, path, LABELS_MAGIC)?;
    if let Some((index, &value)) = data.iter().enumerate().find(|(_, v)| **v > 9) {
        return Err(IdxError::BadLabel {
            path: path.to_path_buf(),
            index,
            value,
        });
    }
    Ok(data.to_vec())
}

/// Reads an IDX image file, gzipped or not.
pub fn read_images(path: impl AsRef<Path>) -> Result<IdxImages, IdxError> {
    let path = path.as_ref();
    parse_images(&read_maybe_gz(path)?, path)
}

/// Reads an IDX label file, gzipped or not.
pub fn read_labels(path: impl AsRef<Path>) -> Result<Vec<u8>, IdxError> {
    let path = path.as_ref();
    parse_labels(&read_maybe_gz(path)?, path)
}

/// MNIST's two splits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MnistSplit {
    /// `train-*` files.
    Train,
    /// `t10k-*` files.
    Test,
}

impl MnistSplit {
    fn prefix(self) -> &'static str {
        match self {
            MnistSplit::Train => "train",
            MnistSplit::Test => "t10k",
        }
    }
}

/// Images and their labels, of equal counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelledImages {
    /// The images.
    pub images: IdxImages,
    /// One digit per image.
    pub labels: Vec<u8>,
}

impl LabelledImages {
    /// Pairs images with labels, checking that their counts agree (`image_path` and
    /// `label_path` name the files in the error).
    pub fn new(
        images: IdxImages,
        labels: Vec<u8>,
        image_path: &Path,
        label_path: &Path,
    ) -> Result<Self, IdxError> {
        if images.count != labels.len() {
            return Err(IdxError::CountMismatch {
                images: image_path.to_path_buf(),
                image_count: images.count,
                labels: label_path.to_path_buf(),
                label_count: labels.len(),
            });
        }
        Ok(Self { images, labels })
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there is no image.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}

/// Finds a split's file in `dir` under its standard names (`train-images-idx3-ubyte`, or with a
/// dot, `train-images.idx3-ubyte`, each with or without `.gz`).
fn find(dir: &Path, split: MnistSplit, kind: &str, rank: u8) -> Result<PathBuf, IdxError> {
    let prefix = split.prefix();
    let mut tried = Vec::new();
    for sep in ['-', '.'] {
        for ext in [".gz", ""] {
            let name = format!("{prefix}-{kind}{sep}idx{rank}-ubyte{ext}");
            let path = dir.join(&name);
            if path.is_file() {
                return Ok(path);
            }
            tried.push(name);
        }
    }
    Err(IdxError::Missing {
        dir: dir.to_path_buf(),
        tried,
    })
}

/// Reads one split of MNIST from a directory of standard IDX files, gzipped or not.
pub fn load_split(dir: impl AsRef<Path>, split: MnistSplit) -> Result<LabelledImages, IdxError> {
    let dir = dir.as_ref();
    let image_path = find(dir, split, "images", 3)?;
    let label_path = find(dir, split, "labels", 1)?;
    let images = read_images(&image_path)?;
    let labels = read_labels(&label_path)?;
    LabelledImages::new(images, labels, &image_path, &label_path)
}
