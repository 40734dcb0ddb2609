//! Seeded text: the same seed gives the same words on every machine, with nothing to download
//! (benchmark corpora, the examples' folders, the engine's randomized tests).

/// SplitMix64: tiny, fast, and good enough to make varied text from a seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }
}

const WORDS: &str = "the of and to in is that for it as was with be by on not he this are or his from at which \
but have an they you were her she there been one all we their has would when if so no will more can its \
who some time these two may first then do any like my now over such our man me even most made after also \
did many before must through back years where much your way well down should because each just those people \
how too little state good very make world still own see men work long get here between both life being under \
never day same another know while last might us great old year off come since against go came right used take \
three system water energy market report data research model network signal protocol engine memory storage \
kernel device battery policy budget contract patient treatment clinical trial sample measure result analysis \
method approach design structure function process theory evidence figure table section chapter appendix \
revenue quarter growth forecast risk customer supplier shipment invoice payment account balance interest \
river mountain forest valley island coast harbor bridge tower castle village garden meadow orchard winter \
summer autumn spring morning evening history library museum theatre concert painting sculpture novel poem \
algorithm compiler database transaction index query cache latency throughput bandwidth cluster scheduler \
tensor gradient matrix vector attention transformer embedding token sequence batch padding alignment";

/// Text of `n` words, in sentences of 6–18 words, capitalised and punctuated.
pub fn words(rng: &mut Rng, n: usize) -> String {
    let vocab: Vec<&str> = WORDS.split_whitespace().collect();
    let mut out = String::with_capacity(n * 7);
    let mut left_in_sentence = 0;
    for i in 0..n {
        let w = vocab[rng.range(0, vocab.len() - 1)];
        if left_in_sentence == 0 {
            if i > 0 {
                out.push_str(". ");
            }
            left_in_sentence = rng.range(6, 18);
            let mut c = w.chars();
            if let Some(first) = c.next() {
                out.extend(first.to_uppercase());
                out.push_str(c.as_str());
            }
        } else {
            out.push(if rng.range(0, 11) == 0 { ',' } else { ' ' });
            if out.ends_with(',') {
                out.push(' ');
            }
            out.push_str(w);
        }
        left_in_sentence -= 1;
    }
    out.push('.');
    out
}
