//! The MNIST classifier: three convolution blocks (3x3 convolution, batch norm, GELU; max
//! pooling after the last two), dropout and two linear layers. Plain Burn modules, generic over
//! `B: Backend`, so the same model trains on any backend.

use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Gelu, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::train::{ClassificationOutput, InferenceStep, TrainOutput, TrainStep};

use crate::data::MnistBatch;
use example_common::read_ahead::ClassificationRead;

/// Digits 0 to 9.
pub const NUM_CLASSES: usize = 10;
/// MNIST images are 28 x 28.
pub const IMAGE_SIZE: usize = 28;

/// Sizes of [`MnistModel`].
#[derive(Config, Debug)]
pub struct MnistModelConfig {
    /// Output channels of the three convolution blocks.
    #[config(default = "[16, 32, 32]")]
    pub channels: [usize; 3],
    /// Width of the hidden linear layer.
    #[config(default = 128)]
    pub hidden: usize,
    /// Dropout probability before each linear layer.
    #[config(default = 0.25)]
    pub dropout: f64,
}

/// 3x3 convolution (no padding), batch norm, GELU, then optionally 2x2 max pooling.
#[derive(Module, Debug)]
pub struct ConvBlock<B: Backend> {
    conv: Conv2d<B>,
    norm: BatchNorm<B>,
    activation: Gelu,
    pool: Option<MaxPool2d>,
}

impl<B: Backend> ConvBlock<B> {
    /// A block from `channels[0]` to `channels[1]` channels.
    pub fn new(channels: [usize; 2], pool: bool, device: &B::Device) -> Self {
        Self {
            conv: Conv2dConfig::new(channels, [3, 3]).init(device),
            norm: BatchNormConfig::new(channels[1]).init(device),
            activation: Gelu::new(),
            pool: pool.then(|| MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init()),
        }
    }

    /// `[batch, in, h, w]` to `[batch, out, h - 2, w - 2]` (halved when pooling).
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let x = self
            .activation
            .forward(self.norm.forward(self.conv.forward(x)));
        match &self.pool {
            Some(pool) => pool.forward(x),
            None => x,
        }
    }
}

/// The MNIST classifier (see the [module docs](self)).
#[derive(Module, Debug)]
pub struct MnistModel<B: Backend> {
    block1: ConvBlock<B>,
    block2: ConvBlock<B>,
    block3: ConvBlock<B>,
    dropout: Dropout,
    fc1: Linear<B>,
    fc2: Linear<B>,
    activation: Gelu,
}

impl MnistModelConfig {
    /// The model, with freshly initialized parameters on `device`.
    pub fn init<B: Backend>(&self, device: &B::Device) -> MnistModel<B> {
        let [c1, c2, c3] = self.channels;
        // 28 -conv-> 26 -conv-> 24 -pool-> 12 -conv-> 10 -pool-> 5
        let side = ((IMAGE_SIZE - 2 - 2) / 2 - 2) / 2;
        MnistModel {
            block1: ConvBlock::new([1, c1], false, device),
            block2: ConvBlock::new([c1, c2], true, device),
            block3: ConvBlock::new([c2, c3], true, device),
            dropout: DropoutConfig::new(self.dropout).init(),
            fc1: LinearConfig::new(c3 * side * side, self.hidden).init(device),
            fc2: LinearConfig::new(self.hidden, NUM_CLASSES).init(device),
            activation: Gelu::new(),
        }
    }
}

impl<B: Backend> MnistModel<B> {
    /// Logits `[batch, 10]` of images `[batch, 28, 28]`.
    pub fn forward(&self, images: Tensor<B, 3>) -> Tensor<B, 2> {
        let [batch, rows, cols] = images.dims();
        let x = images.reshape([batch, 1, rows, cols]);
        let x = self
            .block3
            .forward(self.block2.forward(self.block1.forward(x)));
        let x = x.flatten::<2>(1, 3);
        let x = self
            .activation
            .forward(self.fc1.forward(self.dropout.forward(x)));
        self.fc2.forward(self.dropout.forward(x))
    }

    /// Logits, cross-entropy loss and targets of a batch, as burn-train's metrics take them.
    pub fn forward_classification(&self, batch: MnistBatch<B>) -> ClassificationOutput<B> {
        let output = self.forward(batch.images);
        let loss = CrossEntropyLossConfig::new()
            .init(&output.device())
            .forward(output.clone(), batch.targets.clone());
        ClassificationOutput::new(loss, output, batch.targets)
    }
}

// The outputs are read back on the training thread, when the loop asks for its next batch: read
// from burn-train's metrics thread, they would cut the next step's fusion at random places
// (`example_common::read_ahead`).
impl<B: AutodiffBackend> TrainStep for MnistModel<B> {
    type Input = MnistBatch<B>;
    type Output = ClassificationRead<B>;

    fn step(&self, batch: MnistBatch<B>) -> TrainOutput<ClassificationRead<B>> {
        let item = self.forward_classification(batch);
        let grads = item.loss.backward();
        TrainOutput::new(self, grads, ClassificationRead::new(item))
    }
}

impl<B: Backend> InferenceStep for MnistModel<B> {
    type Input = MnistBatch<B>;
    type Output = ClassificationRead<B>;

    fn step(&self, batch: MnistBatch<B>) -> ClassificationRead<B> {
        ClassificationRead::new(self.forward_classification(batch))
    }
}
