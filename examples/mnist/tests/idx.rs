//! The IDX loader on good files (gzipped and raw) and on malformed ones (truncated, wrong magic
//! number, labels and images of different counts), each a clear error; and the shipped digits.

use std::io::Write;
use std::path::{Path, PathBuf};

use burn::data::dataset::Dataset;
use mnist::data::{MnistDataset, shipped_mnist_dir};
use mnist::idx::{IdxError, MnistSplit, load_split, read_images, read_labels};

fn idx_bytes(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut out = magic.to_be_bytes().to_vec();
    for d in dims {
        out.extend(d.to_be_bytes());
    }
    out.extend(data);
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8], gzip: bool) -> PathBuf {
    let path = dir.join(name);
    let file = std::fs::File::create(&path).unwrap();
    if gzip {
        let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap();
    } else {
        let mut file = file;
        file.write_all(bytes).unwrap();
    }
    path
}

/// Three 2x3 images with pixel values 0..18 and labels 7, 0, 9.
fn three_images() -> (Vec<u8>, Vec<u8>) {
    let pixels: Vec<u8> = (0..18).collect();
    (
        idx_bytes(0x0803, &[3, 2, 3], &pixels),
        idx_bytes(0x0801, &[3], &[7, 0, 9]),
    )
}

#[test]
fn idx_reads_gzipped_and_raw_files() {
    let dir = tempfile::tempdir().unwrap();
    let (images, labels) = three_images();
    // Training split gzipped, test split raw (with the dotted names some mirrors use).
    write(dir.path(), "train-images-idx3-ubyte.gz", &images, true);
    write(dir.path(), "train-labels-idx1-ubyte.gz", &labels, true);
    write(dir.path(), "t10k-images.idx3-ubyte", &images, false);
    write(dir.path(), "t10k-labels.idx1-ubyte", &labels, false);
    for split in [MnistSplit::Train, MnistSplit::Test] {
        let set = load_split(dir.path(), split).unwrap();
        assert_eq!(
            (set.images.count, set.images.rows, set.images.cols),
            (3, 2, 3)
        );
        assert_eq!(set.labels, vec![7, 0, 9]);
        assert_eq!(set.images.image(1), &[6, 7, 8, 9, 10, 11]);
    }
    let item = MnistDataset::new(load_split(dir.path(), MnistSplit::Test).unwrap())
        .get(2)
        .unwrap();
    assert_eq!((item.label, item.rows, item.cols), (9, 2, 3));
    assert_eq!(item.pixels, (12..18).collect::<Vec<u8>>());
}

#[test]
fn idx_rejects_truncated_files() {
    let dir = tempfile::tempdir().unwrap();
    let (images, _) = three_images();
    // Data cut short, gzipped: the gzip stream is fine, the IDX content is not.
    let path = write(dir.path(), "short.gz", &images[..images.len() - 5], true);
    let err = read_images(&path).unwrap_err();
    assert!(matches!(
        err,
        IdxError::Truncated {
            expected: 34,
            found: 29,
            ..
        }
    ));
    let message = err.to_string();
    assert!(message.contains("short.gz"), "{message}");
    assert!(
        message.contains("truncated IDX file: its header announces 34 bytes, it has 29"),
        "{message}"
    );
    // Cut inside the header.
    let path = write(dir.path(), "header", &images[..6], false);
    let message = read_images(&path).unwrap_err().to_string();
    assert!(
        message.contains("announces 16 bytes, it has 6"),
        "{message}"
    );
    // A gzip stream cut short is an I/O error naming the file.
    let full = write(dir.path(), "full.gz", &images, true);
    let gz = std::fs::read(&full).unwrap();
    let path = write(dir.path(), "cut.gz", &gz[..gz.len() / 2], false);
    let message = read_images(&path).unwrap_err().to_string();
    assert!(message.starts_with("cannot read IDX file"), "{message}");
    assert!(message.contains("cut.gz"), "{message}");
}

#[test]
fn idx_rejects_wrong_magic_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let (images, labels) = three_images();
    // A label file where an image file is expected, and the other way round.
    let path = write(dir.path(), "labels", &labels, false);
    let err = read_images(&path).unwrap_err();
    assert!(matches!(
        err,
        IdxError::BadMagic {
            found: 0x0801,
            expected: 0x0803,
            ..
        }
    ));
    let message = err.to_string();
    assert!(
        message.contains("wrong magic number 0x00000801, expected 0x00000803"),
        "{message}"
    );
    assert!(message.contains("MNIST image file"), "{message}");
    let path = write(dir.path(), "images", &images, false);
    let message = read_labels(&path).unwrap_err().to_string();
    assert!(
        message.contains("wrong magic number 0x00000803, expected 0x00000801"),
        "{message}"
    );
    // Not an IDX file at all.
    let path = write(dir.path(), "text.gz", b"hello, world", true);
    let message = read_labels(&path).unwrap_err().to_string();
    assert!(
        message.contains("wrong magic number 0x68656c6c"),
        "{message}"
    );
}

#[test]
fn idx_rejects_mismatched_counts_and_bad_labels() {
    let dir = tempfile::tempdir().unwrap();
    let (images, _) = three_images();
    write(dir.path(), "train-images-idx3-ubyte", &images, false);
    write(
        dir.path(),
        "train-labels-idx1-ubyte",
        &idx_bytes(0x0801, &[2], &[1, 2]),
        false,
    );
    let message = load_split(dir.path(), MnistSplit::Train)
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("label and image counts differ"),
        "{message}"
    );
    assert!(
        message.contains("train-labels-idx1-ubyte has 2 labels"),
        "{message}"
    );
    assert!(
        message.contains("train-images-idx3-ubyte has 3 images"),
        "{message}"
    );

    let path = write(dir.path(), "bad", &idx_bytes(0x0801, &[2], &[3, 10]), false);
    let message = read_labels(&path).unwrap_err().to_string();
    assert!(message.contains("label 1 is 10, not a digit"), "{message}");

    let path = write(dir.path(), "long", &idx_bytes(0x0801, &[1], &[3, 4]), false);
    let message = read_labels(&path).unwrap_err().to_string();
    assert!(message.contains("longer than its header says"), "{message}");

    let message = load_split(dir.path(), MnistSplit::Test)
        .unwrap_err()
        .to_string();
    assert!(message.contains("no MNIST file in"), "{message}");
    assert!(message.contains("t10k-images-idx3-ubyte.gz"), "{message}");
}

#[test]
fn shipped_mnist_has_8000_training_and_2000_test_digits() {
    let dir = shipped_mnist_dir();
    let train = load_split(&dir, MnistSplit::Train).unwrap();
    let test = load_split(&dir, MnistSplit::Test).unwrap();
    assert_eq!((train.len(), test.len()), (8000, 2000));
    assert_eq!((train.images.rows, train.images.cols), (28, 28));
    for set in [&train, &test] {
        let mut counts = [0usize; 10];
        set.labels.iter().for_each(|&l| counts[l as usize] += 1);
        assert!(counts.iter().all(|&c| c > set.len() / 20), "{counts:?}");
    }
}
