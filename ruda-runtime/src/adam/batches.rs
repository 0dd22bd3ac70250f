//! How one call's parameters are cut into kernels: parameters that can share a launch (one
//! dtype, one vector size, AMSGrad or not, the same step scalars) go into one kernel, as many as
//! the device lets one kernel bind and at most [`MAX_PARAMETERS_PER_KERNEL`].

/// Most parameters in one kernel. The kernel's body is unrolled once per parameter, so this
/// bounds its code size and compile time; every distinct count is one more compiled kernel
/// (a model's step uses the same few counts at every step). 32 makes a transformer's hundred
/// parameters four launches.
pub const MAX_PARAMETERS_PER_KERNEL: usize = 32;

/// Bindings a backend may add to a kernel's buffers: CubeCL's metadata and scalars buffer on
/// wgpu (CubeCL already leaves out the one wgpu adds itself).
const RESERVED_BINDINGS: usize = 1;

/// Buffers one parameter binds: parameter, gradient and both moments in, the parameter and both
/// moments out; AMSGrad adds its maximum in and out.
pub(crate) fn bindings_per_parameter(amsgrad: bool) -> usize {
    if amsgrad { 9 } else { 7 }
}

/// How many parameters one kernel takes on a device that binds at most `max_bindings` buffers
/// to a kernel (CubeCL's `max_bindings`: wgpu's storage buffers per shader stage, less one).
/// At least one: a device too small for that fails in CubeCL as a one-parameter kernel did.
pub fn parameters_per_kernel(max_bindings: u32, amsgrad: bool) -> usize {
    let usable = (max_bindings as usize).saturating_sub(RESERVED_BINDINGS);
    (usable / bindings_per_parameter(amsgrad)).clamp(1, MAX_PARAMETERS_PER_KERNEL)
}

/// The indices of `keys` in batches: each batch's keys are equal, indices keep their order
/// within a batch, and a batch holds at most `capacity(key)` (at least one) indices.
pub(crate) fn batches<K: PartialEq>(keys: &[K], capacity: impl Fn(&K) -> usize) -> Vec<Vec<usize>> {
    let mut full = Vec::new();
    // Batches still taking indices, with the key they share.
    let mut open: Vec<(&K, Vec<usize>)> = Vec::new();
    for (index, key) in keys.iter().enumerate() {
        let at = match open.iter().position(|(open_key, _)| *open_key == key) {
            Some(at) => at,
            None => {
                open.push((key, Vec::new()));
                open.len() - 1
            }
        };
        open[at].1.push(index);
        if open[at].1.len() >= capacity(key).max(1) {
            full.push(open.remove(at).1);
        }
    }
    full.extend(open.into_iter().map(|(_, batch)| batch));
    full
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_share_a_batch_in_order() {
        let keys = ['a', 'b', 'a', 'c', 'b', 'a'];
        let got = batches(&keys, |_| 8);
        assert_eq!(got, vec![vec![0, 2, 5], vec![1, 4], vec![3]]);
    }

    #[test]
    fn a_full_batch_closes_and_the_next_one_opens() {
        let keys = [0u8; 7];
        let got = batches(&keys, |_| 3);
        assert_eq!(got, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
    }

    #[test]
    fn capacity_zero_still_takes_one() {
        let got = batches(&[1, 1], |_| 0);
        assert_eq!(got, vec![vec![0], vec![1]]);
    }

    #[test]
    fn every_index_lands_once() {
        let keys: Vec<u32> = (0..200).map(|i| (i * 7919) % 5).collect();
        let got = batches(&keys, |&k| k as usize + 1);
        let mut all: Vec<usize> = got.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..200).collect::<Vec<_>>());
        for batch in &got {
            assert!(batch.len() <= keys[batch[0]] as usize + 1);
            assert!(batch.iter().all(|&i| keys[i] == keys[batch[0]]));
        }
    }

    #[test]
    fn the_binding_limit_sizes_a_kernel() {
        // wgpu's default 8 storage buffers (CubeCL reports 7): one parameter a kernel.
        assert_eq!(parameters_per_kernel(7, false), 1);
        assert_eq!(parameters_per_kernel(7, true), 1);
        // 31 (Metal, less one): 4 parameters, 3 with AMSGrad.
        assert_eq!(parameters_per_kernel(30, false), 4);
        assert_eq!(parameters_per_kernel(30, true), 3);
        // CUDA's 1024 and lavapipe's large limits: the code-size cap.
        assert_eq!(
            parameters_per_kernel(1024, false),
            MAX_PARAMETERS_PER_KERNEL
        );
        assert_eq!(
            parameters_per_kernel(u32::MAX, true),
            MAX_PARAMETERS_PER_KERNEL
        );
    }
}
