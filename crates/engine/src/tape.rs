//! Building a bin's flat tape from planned sequences.
//!
//! Why separate from the packer: the packer decides *which* sequences share a bin from lengths alone
//! (cheap, and property-tested on its own); this module does the memory work of laying their token ids
//! back to back, padding each slot to its aligned size and restarting positions at 0.

use warpfold_backend::{Bin, Layout, SequenceTag};

/// A sequence as the scheduler holds it.
#[derive(Debug, Clone)]
pub struct TokenSequence<'a> {
    pub tag: SequenceTag,
    pub ids: &'a [u32],
}

/// Lays `sequences` out as slots of `slot_len(sequence length)` tokens each.
pub fn build_bin<'a>(
    layout: Layout,
    sequences: impl ExactSizeIterator<Item = TokenSequence<'a>> + Clone,
    slot_len: impl Fn(usize) -> usize,
    capacity: u32,
    pad_token_id: u32,
) -> Bin {
    let n = sequences.len();
    let total: usize = sequences.clone().map(|s| slot_len(s.ids.len())).sum();
    let mut bin = Bin {
        layout,
        input_ids: Vec::with_capacity(total),
        position_ids: Vec::with_capacity(total),
        cu_seqlens: Vec::with_capacity(n + 1),
        seq_lens: Vec::with_capacity(n),
        max_seqlen: 0,
        capacity,
        tags: Vec::with_capacity(n),
    };
    bin.cu_seqlens.push(0);
    for seq in sequences {
        let slot = slot_len(seq.ids.len());
        debug_assert!(slot >= seq.ids.len(), "a slot holds its whole sequence. This is a bug.");
        bin.input_ids.extend_from_slice(seq.ids);
        bin.input_ids.resize(bin.input_ids.len() + slot - seq.ids.len(), pad_token_id);
        // Real tokens count 0, 1, 2, ...; pad tokens (masked out) take position 0, so a slot rounded
        // up past the model's last position embedding still only uses positions it has.
        bin.position_ids.extend(0..seq.ids.len() as u32);
        bin.position_ids.resize(bin.position_ids.len() + slot - seq.ids.len(), 0);
        bin.cu_seqlens.push(bin.input_ids.len() as u32);
        bin.seq_lens.push(seq.ids.len() as u32);
        bin.max_seqlen = bin.max_seqlen.max(slot as u32);
        bin.tags.push(seq.tag);
    }
    bin
}

/// The slots `slots` (in that order) of `bin` as a valid bin of their own: tape, positions and padding
/// copied slot by slot, boundaries rebased. How a bin is cut for a smaller device or a retry.
pub fn select_slots(bin: &Bin, slots: impl IntoIterator<Item = usize>) -> Bin {
    let mut out = Bin {
        layout: bin.layout,
        input_ids: Vec::new(),
        position_ids: Vec::new(),
        cu_seqlens: vec![0],
        seq_lens: Vec::new(),
        max_seqlen: 0,
        capacity: bin.capacity,
        tags: Vec::new(),
    };
    for i in slots {
        let (start, slot, _) = bin.slot(i);
        out.input_ids.extend_from_slice(&bin.input_ids[start..start + slot]);
        out.position_ids.extend_from_slice(&bin.position_ids[start..start + slot]);
        out.cu_seqlens.push(out.input_ids.len() as u32);
        out.seq_lens.push(bin.seq_lens[i]);
        out.max_seqlen = out.max_seqlen.max(slot as u32);
        out.tags.push(bin.tags[i]);
    }
    out
}

/// Splits a bin into its first `at` slots and the rest, each a valid bin of its own (positions
/// and padding unchanged, boundaries rebased): how an out-of-memory bin is retried in halves.
pub fn split_bin(bin: &Bin, at: usize) -> (Bin, Bin) {
    (select_slots(bin, 0..at), select_slots(bin, at..bin.num_sequences()))
}

/// A packed bin: each slot rounded up to `align`.
pub fn packed_bin<'a>(
    sequences: impl ExactSizeIterator<Item = TokenSequence<'a>> + Clone,
    align: u32,
    capacity: u32,
    pad_token_id: u32,
) -> Bin {
    build_bin(Layout::Packed, sequences, |len| crate::packer::aligned_len(len as u32, align) as usize, capacity, pad_token_id)
}

/// A padded batch: every slot as long as the longest sequence, the way Hugging Face batches.
pub fn padded_bin<'a>(sequences: impl ExactSizeIterator<Item = TokenSequence<'a>> + Clone, pad_token_id: u32) -> Bin {
    let longest = sequences.clone().map(|s| s.ids.len()).max().unwrap_or(0);
    let capacity = (longest * sequences.len()) as u32;
    build_bin(Layout::Padded, sequences, |_| longest, capacity, pad_token_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use warpfold_backend::validate_bin;

    fn tag(i: u32) -> SequenceTag {
        SequenceTag { request: 7, index: i }
    }

    #[test]
    fn packed_slots_are_aligned_and_positions_restart() {
        let a = [101, 5, 6, 102];
        let b: Vec<u32> = (0..17).collect();
        let seqs = [TokenSequence { tag: tag(0), ids: &a }, TokenSequence { tag: tag(1), ids: &b }];
        let bin = packed_bin(seqs.iter().cloned(), 16, 64, 0);
        validate_bin(&bin).unwrap();
        assert_eq!(bin.cu_seqlens, vec![0, 16, 48]);
        assert_eq!(bin.seq_lens, vec![4, 17]);
        assert_eq!(bin.max_seqlen, 32);
        assert_eq!(&bin.input_ids[..6], &[101, 5, 6, 102, 0, 0]);
        assert_eq!(bin.position_ids[16], 0);
        assert_eq!(bin.position_ids[3], 3);
        assert_eq!(bin.position_ids[4], 0, "pad tokens take position 0");
        assert_eq!(&bin.input_ids[16..33], b.as_slice());
        assert_eq!(bin.real_tokens(), 21);
        assert_eq!(bin.pad_tokens(), 27);
    }

    #[test]
    fn padded_batch_pads_every_slot_to_the_longest() {
        let a = [1, 2];
        let b = [1, 2, 3, 4, 5];
        let seqs = [TokenSequence { tag: tag(0), ids: &a }, TokenSequence { tag: tag(1), ids: &b }];
        let bin = padded_bin(seqs.iter().cloned(), 0);
        validate_bin(&bin).unwrap();
        assert_eq!(bin.cu_seqlens, vec![0, 5, 10]);
        assert_eq!(bin.layout, Layout::Padded);
        assert_eq!(bin.pad_tokens(), 3);
    }
}
