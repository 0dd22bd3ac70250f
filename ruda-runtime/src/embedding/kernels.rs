//! The embedding-backward `#[cube]` kernel.

use cubecl::prelude::*;

/// One cube per (table row, block of columns) item, looping over items past the grid. Every
/// unit of a cube owns one vector of columns; the cube walks the tokens in tiles of
/// `block` indices staged in shared memory, and each unit adds the gradient vectors of the tokens
/// whose index is the row. The loops are uniform across the cube, so the barriers are reached
/// by every unit.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn embedding_backward_kernel<F: Float, I: Int, A: Float, N: Size>(
    indices: &Array<I>,
    grad: &Array<Vector<F, N>>,
    out: &mut Array<Vector<F, N>>,
    tokens: usize,
    d_vec: usize,
    col_blocks: usize,
    items: usize,
    #[comptime] block: usize,
    #[define(F, I, A)] _dtypes: [StorageType; 3],
) {
    let lane = UNIT_POS_X as usize;
    let mut tile = SharedMemory::<I>::new(block);
    let mut item = CUBE_POS;
    while item < items {
        let row = item / col_blocks;
        let col = (item % col_blocks) * block + lane;
        let target = I::cast_from(row);
        let mut sum = Vector::<A, N>::from_int(0);
        let mut start = 0;
        while start < tokens {
            let token = start + lane;
            if token < tokens {
                tile[lane] = indices[token];
            }
            sync_cube();
            let mut len = tokens - start;
            if len > block {
                len = block;
            }
            if col < d_vec {
                for j in 0..len {
                    if tile[j] == target {
                        sum += Vector::cast_from(grad[(start + j) * d_vec + col]);
                    }
                }
            }
            // Every unit is done with the tile before the next one overwrites it.
            sync_cube();
            start += block;
        }
        if col < d_vec {
            out[row * d_vec + col] = Vector::cast_from(sum);
        }
        item += CUBE_COUNT;
    }
}
