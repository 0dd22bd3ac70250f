//! burn-ruda through Burn, on Mesa's CPU Vulkan driver: one test binary for the three suites
//! that instantiate the whole backend (`Ruda<RudaWgpu>` behind Burn's fusion, both autodiff
//! decorators, Burn's NdArray as the reference). As three binaries each generated and linked its
//! own copy of that code: 765 s of one core in CI's debug build, for 18 + 4 + 3 tests.
//!
//! The tests that run a native LayerNorm, count native calls or move tensors between threads
//! are `#[serial]` (one lock for the whole binary): the counters are process-global. Tests that
//! need a setting read once per process (`fusers`, `gelu`) run in a child process of this
//! binary ([`child`]), so they too share its compiled code.

mod burn_backend;
mod child;
mod errors;
mod fusers;
mod gelu;
mod optim;
mod threads;
mod transparency;
