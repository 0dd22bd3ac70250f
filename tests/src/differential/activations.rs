//! Activation functions (Burn's `activation` module; some are backend ops, some composed).

use burn::tensor::activation;
use burn::tensor::backend::Backend;

use super::{CheckResult, Checker};

/// Every activation on `[6, 10]` inputs in `[-4, 4)`, softmax-like ones along each dim.
pub fn activations<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a: [6, 10] in [-4, 4); alpha: [10]");
    let (a, na) = c.floats_in(29, [6, 10], -4.0, 4.0);
    macro_rules! unary {
        ($name:literal, $f:expr) => {
            c.close($name, $f(a.clone()), $f(na.clone()));
        };
    }
    unary!("relu", activation::relu);
    unary!("gelu", activation::gelu);
    unary!("gelu_approximate", activation::gelu_approximate);
    unary!("sigmoid", activation::sigmoid);
    unary!("log_sigmoid", activation::log_sigmoid);
    unary!("silu", activation::silu);
    unary!("mish", activation::mish);
    unary!("tanh", activation::tanh);
    unary!("hard_swish", activation::hard_swish);
    unary!("selu", activation::selu);
    unary!("softsign", activation::softsign);
    c.close(
        "leaky_relu(0.1)",
        activation::leaky_relu(a.clone(), 0.1),
        activation::leaky_relu(na.clone(), 0.1),
    );
    c.close(
        "hard_sigmoid(0.2, 0.5)",
        activation::hard_sigmoid(a.clone(), 0.2, 0.5),
        activation::hard_sigmoid(na.clone(), 0.2, 0.5),
    );
    c.close(
        "softplus(2)",
        activation::softplus(a.clone(), 2.0),
        activation::softplus(na.clone(), 2.0),
    );
    c.close(
        "elu(0.7)",
        activation::elu(a.clone(), 0.7),
        activation::elu(na.clone(), 0.7),
    );
    c.close(
        "celu(1.3)",
        activation::celu(a.clone(), 1.3),
        activation::celu(na.clone(), 1.3),
    );
    c.close(
        "thresholded_relu(0.5)",
        activation::thresholded_relu(a.clone(), 0.5),
        activation::thresholded_relu(na.clone(), 0.5),
    );
    c.close(
        "hard_shrink(0.5)",
        activation::hard_shrink(a.clone(), 0.5),
        activation::hard_shrink(na.clone(), 0.5),
    );
    c.close(
        "soft_shrink(0.5)",
        activation::soft_shrink(a.clone(), 0.5),
        activation::soft_shrink(na.clone(), 0.5),
    );
    let (alpha, nalpha) = c.floats_in(30, [10], 0.0, 0.5);
    c.close(
        "prelu(alpha [10])",
        activation::prelu(a.clone(), alpha),
        activation::prelu(na.clone(), nalpha),
    );
    c.close(
        "glu(dim 1)",
        activation::glu(a.clone(), 1),
        activation::glu(na.clone(), 1),
    );
    for dim in 0..2 {
        c.close(
            &format!("softmax(dim {dim})"),
            activation::softmax(a.clone(), dim),
            activation::softmax(na.clone(), dim),
        );
        c.close(
            &format!("log_softmax(dim {dim})"),
            activation::log_softmax(a.clone(), dim),
            activation::log_softmax(na.clone(), dim),
        );
        c.close(
            &format!("softmin(dim {dim})"),
            activation::softmin(a.clone(), dim),
            activation::softmin(na.clone(), dim),
        );
        c.close(
            &format!("quiet_softmax(dim {dim})"),
            activation::quiet_softmax(a.clone(), dim),
            activation::quiet_softmax(na.clone(), dim),
        );
    }
    c.finish()
}
