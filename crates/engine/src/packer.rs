//! Bin packing: which sequences share a bin.
//!
//! Why First-Fit-Decreasing: placing the longest sequences first leaves the short ones to fill the
//! gaps, which bounds the bins used by 11/9 of the optimum (plus a constant) at O(n log n). Why a
//! tournament tree: the textbook first-fit scans every open bin for each item (O(n · bins)); a max-tree
//! over the bins' free space finds the leftmost bin with room in O(log bins), which is what lets the
//! packer place millions of sequences per second.
//!
//! FFD is not monotone: on some inputs plain first-fit in arrival order needs fewer bins (for example
//! capacity 31 and lengths 14, 14, 15, 3, 6, 9: arrival order fits two bins, FFD needs three). The
//! packer therefore runs both and keeps the plan with fewer bins, so it never does worse than either.
//!
//! Lengths are rounded up to the alignment quantum before packing, so that every slot starts at a
//! multiple of the quantum (the tensor cores want multiples of 16); `align = 1` turns that off.

/// Rounds `len` up to a multiple of `align` (`align` 0 or 1: unchanged).
pub fn aligned_len(len: u32, align: u32) -> u32 {
    if align <= 1 {
        len
    } else {
        len.div_ceil(align) * align
    }
}

/// The result of packing: for each bin, the indices (into the input lengths) of its sequences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackPlan {
    pub bins: Vec<Vec<u32>>,
}

impl PackPlan {
    pub fn num_bins(&self) -> usize {
        self.bins.len()
    }
}

/// An item that can never fit: its aligned length exceeds the capacity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sequence {index} needs {aligned_len} tokens after alignment, more than the bin capacity of {capacity}")]
pub struct ItemTooLarge {
    pub index: usize,
    pub aligned_len: u32,
    pub capacity: u32,
}

/// Max-tree over bins' free space: leaf `i` is bin `i`; bins not yet opened have the full capacity,
/// so "the leftmost leaf with room" is either an open bin or the next one to open.
struct FreeSpaceTree {
    leaves: usize,
    free: Vec<u32>,
}

impl FreeSpaceTree {
    fn new(max_bins: usize, capacity: u32) -> Self {
        let leaves = max_bins.max(1).next_power_of_two();
        Self { leaves, free: vec![capacity; 2 * leaves] }
    }

    /// Places `size` in the leftmost bin with room and returns that bin. The caller guarantees
    /// `size <= capacity` and that there are at least as many leaves as items.
    fn place(&mut self, size: u32) -> usize {
        debug_assert!(self.free[1] >= size, "tree has room for every item. This is a bug.");
        let mut node = 1;
        while node < self.leaves {
            node = if self.free[2 * node] >= size { 2 * node } else { 2 * node + 1 };
        }
        let bin = node - self.leaves;
        self.free[node] -= size;
        while node > 1 {
            node /= 2;
            self.free[node] = self.free[2 * node].max(self.free[2 * node + 1]);
        }
        bin
    }
}

fn check_sizes(lengths: &[u32], capacity: u32) -> Result<(), ItemTooLarge> {
    match lengths.iter().position(|&l| l > capacity) {
        Some(index) => Err(ItemTooLarge { index, aligned_len: lengths[index], capacity }),
        None => Ok(()),
    }
}

fn first_fit_in_order(order: impl Iterator<Item = u32>, lengths: &[u32], capacity: u32) -> PackPlan {
    let mut tree = FreeSpaceTree::new(lengths.len(), capacity);
    let mut bins: Vec<Vec<u32>> = Vec::new();
    for item in order {
        let bin = tree.place(lengths[item as usize]);
        if bin == bins.len() {
            bins.push(Vec::new());
        }
        bins[bin].push(item);
    }
    PackPlan { bins }
}

/// First-fit in arrival order (the comparison point for FFD, and one of the two plans `pack` weighs).
/// `lengths` are already aligned.
pub fn first_fit(lengths: &[u32], capacity: u32) -> Result<PackPlan, ItemTooLarge> {
    check_sizes(lengths, capacity)?;
    Ok(first_fit_in_order(0..lengths.len() as u32, lengths, capacity))
}

/// Pure First-Fit-Decreasing: longest first, ties in arrival order. `lengths` are already aligned.
pub fn first_fit_decreasing(lengths: &[u32], capacity: u32) -> Result<PackPlan, ItemTooLarge> {
    check_sizes(lengths, capacity)?;
    // One u64 key per item: length descending in the high half, arrival index in the low half, so an
    // unstable sort gives a stable order without a comparator closure.
    let mut keys: Vec<u64> = lengths.iter().enumerate().map(|(i, &l)| (u64::from(!l) << 32) | i as u64).collect();
    keys.sort_unstable();
    Ok(first_fit_in_order(keys.into_iter().map(|k| k as u32), lengths, capacity))
}

/// The packer: FFD, or arrival-order first-fit when that needs fewer bins. `lengths` are aligned.
pub fn pack(lengths: &[u32], capacity: u32) -> Result<PackPlan, ItemTooLarge> {
    let ffd = first_fit_decreasing(lengths, capacity)?;
    // A lower bound on any plan: if FFD reaches it, arrival order cannot beat it.
    let total: u64 = lengths.iter().map(|&l| u64::from(l)).sum();
    if ffd.num_bins() as u64 <= total.div_ceil(u64::from(capacity.max(1))) {
        return Ok(ffd);
    }
    let ff = first_fit_in_order(0..lengths.len() as u32, lengths, capacity);
    Ok(if ff.num_bins() < ffd.num_bins() { ff } else { ffd })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Fewest bins any assignment can use, by exhaustive search (small instances only).
    fn optimal_bins(lengths: &[u32], capacity: u32) -> usize {
        fn search(items: &[u32], i: usize, bins: &mut Vec<u32>, cap: u32, best: &mut usize) {
            if bins.len() >= *best {
                return;
            }
            if i == items.len() {
                *best = bins.len();
                return;
            }
            for b in 0..bins.len() {
                // Bins with equal load are interchangeable: try only the first of them.
                if bins[b] + items[i] <= cap && !bins[..b].contains(&bins[b]) {
                    bins[b] += items[i];
                    search(items, i + 1, bins, cap, best);
                    bins[b] -= items[i];
                }
            }
            bins.push(items[i]);
            search(items, i + 1, bins, cap, best);
            bins.pop();
        }
        let mut items = lengths.to_vec();
        items.sort_unstable_by(|a, b| b.cmp(a));
        let mut best = items.len();
        search(&items, 0, &mut Vec::new(), capacity, &mut best);
        best
    }

    fn check_plan(plan: &PackPlan, lengths: &[u32], capacity: u32) {
        let mut seen = vec![0u32; lengths.len()];
        for bin in &plan.bins {
            assert!(!bin.is_empty(), "no empty bins");
            let load: u64 = bin.iter().map(|&i| u64::from(lengths[i as usize])).sum();
            assert!(load <= u64::from(capacity), "bin over capacity: {load} > {capacity}");
            for &i in bin {
                seen[i as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "every sequence placed exactly once: {seen:?}");
    }

    #[test]
    fn aligned_len_rounds_up_to_the_quantum() {
        assert_eq!(aligned_len(1, 16), 16);
        assert_eq!(aligned_len(16, 16), 16);
        assert_eq!(aligned_len(17, 16), 32);
        assert_eq!(aligned_len(17, 1), 17);
        assert_eq!(aligned_len(17, 0), 17);
    }

    #[test]
    fn ffd_alone_can_lose_to_arrival_order_but_pack_does_not() {
        let lengths = [14, 14, 15, 3, 6, 9];
        assert_eq!(first_fit_decreasing(&lengths, 31).unwrap().num_bins(), 3);
        assert_eq!(first_fit(&lengths, 31).unwrap().num_bins(), 2);
        assert_eq!(pack(&lengths, 31).unwrap().num_bins(), 2);
    }

    #[test]
    fn an_item_larger_than_the_capacity_is_an_error_naming_it() {
        let err = pack(&[10, 40, 5], 32).unwrap_err();
        assert_eq!(err, ItemTooLarge { index: 1, aligned_len: 40, capacity: 32 });
    }

    #[test]
    fn empty_input_packs_into_no_bins() {
        assert_eq!(pack(&[], 64).unwrap().num_bins(), 0);
    }

    proptest! {
        #[test]
        fn every_sequence_once_and_no_bin_over_capacity(
            raw in prop::collection::vec(1u32..600, 0..300),
            capacity in 600u32..4096,
            align in prop::sample::select(vec![1u32, 8, 16, 64]),
        ) {
            let lengths: Vec<u32> = raw.iter().map(|&l| aligned_len(l, align)).collect();
            prop_assume!(lengths.iter().all(|&l| l <= capacity));
            let plan = pack(&lengths, capacity).unwrap();
            check_plan(&plan, &lengths, capacity);
            // Slot offsets inside a bin are prefix sums of aligned lengths, hence aligned.
            for bin in &plan.bins {
                let mut offset = 0u32;
                for &i in bin {
                    prop_assert_eq!(offset % align.max(1), 0);
                    offset += lengths[i as usize];
                }
            }
        }

        #[test]
        fn never_more_bins_than_first_fit_in_arrival_order(
            lengths in prop::collection::vec(1u32..100, 0..200),
            capacity in 100u32..300,
        ) {
            let packed = pack(&lengths, capacity).unwrap().num_bins();
            let ff = first_fit(&lengths, capacity).unwrap().num_bins();
            prop_assert!(packed <= ff, "pack {} > first-fit {}", packed, ff);
        }

        #[test]
        fn within_eleven_ninths_of_optimal_plus_one(
            lengths in prop::collection::vec(1u32..=50, 1..10),
            capacity in 50u32..=100,
        ) {
            let plan = pack(&lengths, capacity).unwrap();
            check_plan(&plan, &lengths, capacity);
            let opt = optimal_bins(&lengths, capacity);
            prop_assert!(opt <= plan.num_bins());
            prop_assert!(9 * plan.num_bins() <= 11 * opt + 9, "{} bins, optimum {}", plan.num_bins(), opt);
        }
    }
}
