//! MNIST for burn-ruda's `mnist` example and its tests: the IDX loader, a burn-dataset `Dataset`
//! and `Batcher`, the CNN, and training with burn-train's `Learner`.

pub mod data;
pub mod idx;
pub mod model;
pub mod training;
