//! [`ResetWhenUsed`]: a fuser whose `reset` does nothing while it holds nothing to reset.

use burn_fusion::{FuserProperties, FuserStatus, OperationFuser};
use burn_ir::OperationIr;

/// A burn-cubecl-fusion fuser that skips `reset` while nothing was fused into it since its
/// last one.
///
/// burn-fusion's search keeps one template of every fuser and resets all of them after every
/// segment it runs, a stored plan or a new one (`StreamOptimizer::reset`), though it never fuses
/// into them: each search block fuses into copies. So in a training loop, where every segment
/// comes from a stored plan, each step pays a reset of every fuser per segment for nothing,
/// about a microsecond for the reduce-broadcasted fuser alone, which rebuilds its blocks.
///
/// What must hold: a reset after a reset changes nothing (each of burn-cubecl-fusion's resets
/// re-initializes the fuser's state from its settings), and only `fuse` and `finish` change that
/// state. The first reset always runs, so a fuser fresh from `new` is reset as Burn's would be.
#[derive(Clone)]
pub struct ResetWhenUsed<F> {
    fuser: F,
    /// Something was fused or finished since the last reset (or the fuser is new).
    used: bool,
}

impl<F> ResetWhenUsed<F> {
    /// `fuser`, new: its first reset runs.
    pub fn new(fuser: F) -> Self {
        Self { fuser, used: true }
    }
}

impl<O, F> OperationFuser<O> for ResetWhenUsed<F>
where
    F: OperationFuser<O> + Clone + 'static,
{
    fn fuse(&mut self, operation: &OperationIr) {
        self.used = true;
        self.fuser.fuse(operation);
    }

    fn finish(&mut self) -> O {
        self.used = true;
        self.fuser.finish()
    }

    fn reset(&mut self) {
        if self.used {
            self.fuser.reset();
            self.used = false;
        }
    }

    fn status(&self) -> FuserStatus {
        self.fuser.status()
    }

    fn properties(&self) -> FuserProperties {
        self.fuser.properties()
    }

    fn len(&self) -> usize {
        self.fuser.len()
    }

    fn clone_dyn(&self) -> Box<dyn OperationFuser<O>> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fuser that counts its resets and the operations fused since the last one.
    #[derive(Clone, Default)]
    struct Counting {
        fused: usize,
        resets: usize,
    }

    impl OperationFuser<usize> for Counting {
        fn fuse(&mut self, _: &OperationIr) {
            self.fused += 1;
        }
        fn finish(&mut self) -> usize {
            self.fused
        }
        fn reset(&mut self) {
            self.fused = 0;
            self.resets += 1;
        }
        fn status(&self) -> FuserStatus {
            FuserStatus::Open
        }
        fn properties(&self) -> FuserProperties {
            FuserProperties::default()
        }
        fn len(&self) -> usize {
            self.fused
        }
        fn clone_dyn(&self) -> Box<dyn OperationFuser<usize>> {
            Box::new(self.clone())
        }
    }

    fn an_operation() -> OperationIr {
        OperationIr::Drop(burn_ir::TensorIr::uninit(
            burn_ir::TensorId::new(0),
            burn_backend::Shape::new([1]),
            burn_backend::DType::F32,
        ))
    }

    #[test]
    fn resets_run_once_after_use_and_first_for_a_new_fuser() {
        let mut fuser = ResetWhenUsed::new(Counting::default());
        fuser.reset();
        fuser.reset();
        assert_eq!(
            fuser.fuser.resets, 1,
            "a new fuser is reset once, then not again"
        );
        fuser.fuse(&an_operation());
        fuser.fuse(&an_operation());
        assert_eq!(fuser.len(), 2);
        fuser.reset();
        fuser.reset();
        assert_eq!(
            (fuser.fuser.resets, fuser.len()),
            (2, 0),
            "used: reset once"
        );
        let _ = fuser.finish();
        fuser.reset();
        assert_eq!(fuser.fuser.resets, 3, "finish counts as use");
    }

    #[test]
    fn a_copy_keeps_the_state_and_whether_it_was_used() {
        let mut fuser = ResetWhenUsed::new(Counting::default());
        fuser.reset();
        let mut clean = fuser.clone();
        clean.reset();
        assert_eq!(
            clean.fuser.resets, 1,
            "a copy of a reset fuser skips its reset"
        );
        fuser.fuse(&an_operation());
        let mut used = fuser.clone_dyn();
        assert_eq!(used.len(), 1);
        used.reset();
        assert_eq!(used.len(), 0, "a copy of a used fuser resets");
    }
}
