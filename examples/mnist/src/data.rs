//! MNIST as a burn-dataset [`Dataset`] of [`MnistItem`]s and a [`Batcher`] that turns them into
//! normalized image tensors and class targets on the training device.

use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::prelude::*;

use crate::idx::LabelledImages;

/// Mean of MNIST's training pixels, scaled to `[0, 1]`.
pub const PIXEL_MEAN: f32 = 0.1307;
/// Standard deviation of MNIST's training pixels, scaled to `[0, 1]`.
pub const PIXEL_STD: f32 = 0.3081;

/// The 10,000 real MNIST digits shipped with the example (`examples/mnist/data/`, see its
/// README): 8,000 for training, 2,000 for testing, in MNIST's IDX format.
pub fn shipped_mnist_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data")
}

/// One digit: its pixels (row-major, 0 to 255) and its label.
#[derive(Clone, Debug)]
pub struct MnistItem {
    /// `rows * cols` pixel values.
    pub pixels: Vec<u8>,
    /// Image height.
    pub rows: usize,
    /// Image width.
    pub cols: usize,
    /// The digit, 0 to 9.
    pub label: u8,
}

/// A range of digits of a [`LabelledImages`] set, shared without copying.
#[derive(Clone, Debug)]
pub struct MnistDataset {
    data: Arc<LabelledImages>,
    start: usize,
    len: usize,
}

impl MnistDataset {
    /// All digits of `data`.
    pub fn new(data: LabelledImages) -> Self {
        let len = data.len();
        Self {
            data: Arc::new(data),
            start: 0,
            len,
        }
    }

    /// The first `n` digits (all of them when there are fewer).
    pub fn take(&self, n: usize) -> Self {
        Self {
            data: self.data.clone(),
            start: self.start,
            len: self.len.min(n),
        }
    }

    /// Height and width of the images.
    pub fn image_size(&self) -> (usize, usize) {
        (self.data.images.rows, self.data.images.cols)
    }
}

impl Dataset<MnistItem> for MnistDataset {
    fn get(&self, index: usize) -> Option<MnistItem> {
        if index >= self.len {
            return None;
        }
        let i = self.start + index;
        Some(MnistItem {
            pixels: self.data.images.image(i).to_vec(),
            rows: self.data.images.rows,
            cols: self.data.images.cols,
            label: self.data.labels[i],
        })
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// A batch of digits on a device.
#[derive(Clone, Debug)]
pub struct MnistBatch<B: Backend> {
    /// `[batch, rows, cols]`, normalized to zero mean and unit variance over MNIST.
    pub images: Tensor<B, 3>,
    /// `[batch]` digits.
    pub targets: Tensor<B, 1, Int>,
}

/// Builds [`MnistBatch`]es: scales pixels to `[0, 1]` and normalizes them with
/// [`PIXEL_MEAN`] and [`PIXEL_STD`].
#[derive(Clone, Debug, Default)]
pub struct MnistBatcher;

impl<B: Backend> Batcher<B, MnistItem, MnistBatch<B>> for MnistBatcher {
    fn batch(&self, items: Vec<MnistItem>, device: &B::Device) -> MnistBatch<B> {
        let (rows, cols) = items.first().map_or((0, 0), |i| (i.rows, i.cols));
        let mut pixels = Vec::with_capacity(items.len() * rows * cols);
        let mut targets = Vec::with_capacity(items.len());
        for item in &items {
            assert_eq!(
                (item.rows, item.cols),
                (rows, cols),
                "images of one batch differ in size"
            );
            pixels.extend(
                item.pixels
                    .iter()
                    .map(|&p| (p as f32 / 255.0 - PIXEL_MEAN) / PIXEL_STD),
            );
            targets.push(item.label as i64);
        }
        let images = Tensor::from_data(TensorData::new(pixels, [items.len(), rows, cols]), device);
        let targets = Tensor::from_data(TensorData::new(targets, [items.len()]), device);
        MnistBatch { images, targets }
    }
}
