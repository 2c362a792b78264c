//! fastText-style word vectors composed from character n-grams.

use std::collections::HashMap;

use rand::Rng;
use sprs::{CsMat, TriMat};

use super::{Module, ParamVisitor, init};
use crate::autograd::{Index, Param, SparseMatrix, Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result, check_positive};

/// Which character n-grams a [`SubwordEmbedding`] keeps.
///
/// A word `w` is read as `<w>` (the brackets mark its start and end, as in
/// fastText), and every substring of `min_n..=max_n` characters of that is
/// one of its n-grams. An n-gram gets its own row in the table only if at
/// least `min_words` words of the vocabulary contain it (an n-gram of a
/// single word adds nothing that the word's own row does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubwordConfig {
    /// Shortest n-gram, in characters (fastText: 3).
    pub min_n: usize,
    /// Longest n-gram, in characters (fastText: 6).
    pub max_n: usize,
    /// Fewest vocabulary words an n-gram must occur in to get a row.
    pub min_words: usize,
}

impl Default for SubwordConfig {
    /// fastText's n-gram lengths, 3 to 6, kept when shared by two words.
    fn default() -> Self {
        SubwordConfig {
            min_n: 3,
            max_n: 6,
            min_words: 2,
        }
    }
}

impl SubwordConfig {
    /// Checks `1 <= min_n <= max_n` ([`Error::InvalidConfig`] otherwise).
    /// [`SubwordEmbedding`]'s constructors call it; a front end can call it
    /// to reject a configuration before building anything.
    ///
    /// ```
    /// use hdgcn::nn::SubwordConfig;
    /// let bad = SubwordConfig { min_n: 4, max_n: 3, ..SubwordConfig::default() };
    /// assert!(bad.validate().is_err());
    /// assert!(SubwordConfig::default().validate().is_ok());
    /// ```
    pub fn validate(&self) -> Result<()> {
        if self.min_n == 0 || self.min_n > self.max_n {
            return Err(Error::InvalidConfig(format!(
                "subword n-gram lengths must satisfy 1 <= min_n <= max_n, got {}..={}",
                self.min_n, self.max_n
            )));
        }
        Ok(())
    }

    /// The distinct n-grams of `word` (as `<word>`), in order of first
    /// occurrence.
    pub fn ngrams(&self, word: &str) -> Vec<String> {
        let chars: Vec<char> = std::iter::once('<')
            .chain(word.chars())
            .chain(std::iter::once('>'))
            .collect();
        let mut out: Vec<String> = Vec::new();
        for n in self.min_n..=self.max_n {
            for w in chars.windows(n) {
                let g: String = w.iter().collect();
                if !out.contains(&g) {
                    out.push(g);
                }
            }
        }
        out
    }
}

/// Word vectors as the mean of a word's own row and the rows of its
/// character n-grams (Bojanowski et al., 2017, "Enriching Word Vectors with
/// Subword Information"), trained from scratch.
///
/// The table (`weight`, `rows x dim`) holds one row per vocabulary word
/// (ids `0..words`, the ids of the token vocabulary) followed by one row
/// per kept n-gram. Token `i` maps to `Σ_r C[i, r] · weight[r]`, where the
/// constant composition matrix `C` (`words x rows`) averages the word's row
/// and its n-grams' rows. Words that share n-grams share parameters, so a
/// rare word's vector learns from the frequent words it resembles.
///
/// ```
/// use hdgcn::autograd::{Index, Tape};
/// use hdgcn::backend::Cpu;
/// use hdgcn::nn::{SubwordConfig, SubwordEmbedding};
/// use rand::SeedableRng;
/// let cpu = Cpu::<f64>::new();
/// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
/// let words = ["<unk>", "cardiac", "cardiology", "renal"];
/// let emb = SubwordEmbedding::new(&cpu, &words, SubwordConfig::default(), 8, 0.1, &mut rng)?;
/// // "<ca", "car", "card", ... are shared by the two cardio- words.
/// assert!(emb.num_ngrams() > 0);
/// let x = emb.forward(&Tape::inference(&cpu), &Index::new(&cpu, &[1, 3, 1])?)?;
/// assert_eq!(x.shape(), (3, 8));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct SubwordEmbedding<B: Backend> {
    /// The table: the words' rows, then the n-grams' rows.
    pub weight: Param<B>,
    config: SubwordConfig,
    /// Row of each kept n-gram in `weight`.
    ngram_rows: HashMap<String, usize>,
    /// Per token id, the table rows that make its vector, with weights
    /// summing to 1 (empty: the zero vector).
    composition: Vec<Vec<(usize, f64)>>,
}

/// Whether `w` is a special token such as `<unk>` (no n-grams).
fn is_special(w: &str) -> bool {
    w.len() >= 2 && w.starts_with('<') && w.ends_with('>')
}

/// `rows`, each weighing `1 / rows.len()`.
fn mean_of(rows: Vec<usize>) -> Vec<(usize, f64)> {
    let w = 1.0 / rows.len().max(1) as f64;
    rows.into_iter().map(|r| (r, w)).collect()
}

impl<B: Backend> SubwordEmbedding<B> {
    /// A table for the vocabulary `words` (index = token id), each row
    /// initialised N(0, `std`²).
    ///
    /// Words written with a leading `<` and trailing `>` (such as
    /// `"<unk>"`) are special tokens: they get their own row and no n-grams.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an empty vocabulary, `dim == 0`, a
    /// `std` that is not finite and positive, or bad n-gram lengths.
    pub fn new<S: AsRef<str>, R: Rng + ?Sized>(
        backend: &B,
        words: &[S],
        config: SubwordConfig,
        dim: usize,
        std: f64,
        rng: &mut R,
    ) -> Result<Self> {
        config.validate()?;
        if words.is_empty() || dim == 0 {
            return Err(Error::InvalidConfig(format!(
                "subword embedding size must be positive, got {} words x {dim}",
                words.len()
            )));
        }
        check_positive("embedding init std", std)?;
        let grams: Vec<Vec<String>> = words
            .iter()
            .map(|w| {
                let w = w.as_ref();
                if is_special(w) {
                    Vec::new()
                } else {
                    config.ngrams(w)
                }
            })
            .collect();
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for g in grams.iter().flatten() {
            *counts.entry(g.as_str()).or_insert(0) += 1;
        }
        // Rows in order of first occurrence over the vocabulary: deterministic.
        let mut ngram_rows: HashMap<String, usize> = HashMap::new();
        let mut composition = Vec::with_capacity(words.len());
        for (i, gs) in grams.iter().enumerate() {
            let mut rows = vec![i];
            for g in gs {
                if counts[g.as_str()] < config.min_words.max(1) {
                    continue;
                }
                let next = words.len() + ngram_rows.len();
                rows.push(*ngram_rows.entry(g.clone()).or_insert(next));
            }
            composition.push(mean_of(rows));
        }
        let rows = words.len() + ngram_rows.len();
        Ok(SubwordEmbedding {
            weight: init::normal_named("subword embedding table", backend, rows, dim, std, rng)?,
            config,
            ngram_rows,
            composition,
        })
    }

    /// Gives words outside the vocabulary (seen only at test time, say)
    /// the ids `num_words()..`, in the order given, as fastText composes
    /// vectors for unknown words: each is the mean of the rows of its
    /// n-grams that the table has, with no row of its own, so the table
    /// (and a checkpoint of it) is unchanged. A word with none of the
    /// table's n-grams, or a special token, maps to the zero vector.
    /// Returns the ids given.
    pub fn extend_vocabulary<S: AsRef<str>>(&mut self, words: &[S]) -> std::ops::Range<usize> {
        let start = self.num_words();
        for w in words {
            let w = w.as_ref();
            let rows = if is_special(w) {
                Vec::new()
            } else {
                self.config
                    .ngrams(w)
                    .iter()
                    .filter_map(|g| self.ngram_rows.get(g).copied())
                    .collect()
            };
            self.composition.push(mean_of(rows));
        }
        start..self.num_words()
    }

    /// Number of token ids it embeds (`0..num_words()`): the vocabulary
    /// and any words added by [`SubwordEmbedding::extend_vocabulary`].
    pub fn num_words(&self) -> usize {
        self.composition.len()
    }

    /// Number of n-gram rows in the table.
    pub fn num_ngrams(&self) -> usize {
        self.ngram_rows.len()
    }

    /// Vector width.
    pub fn dim(&self) -> usize {
        self.weight.shape().1
    }

    /// The n-gram lengths and sharing threshold it was built with.
    pub fn config(&self) -> SubwordConfig {
        self.config
    }

    /// Vectors of the tokens in `idx` (`len x dim`): each distinct token's
    /// vector is composed once (a sparse product over the table), then
    /// gathered per position.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for a token id `>= num_words()`.
    pub fn forward(&self, tape: &Tape<B>, idx: &Index<B>) -> Result<Var<B>> {
        let n = self.num_words();
        let mut local = vec![usize::MAX; n];
        let mut distinct: Vec<usize> = Vec::new();
        let mut pos = Vec::with_capacity(idx.len());
        for &t in idx.host() {
            if t >= n {
                return Err(Error::IndexOutOfRange {
                    what: "subword embedding token",
                    index: t,
                    len: n,
                });
            }
            if local[t] == usize::MAX {
                local[t] = distinct.len();
                distinct.push(t);
            }
            pos.push(local[t]);
        }
        let backend = tape.backend();
        let mut tri = TriMat::new((distinct.len(), self.weight.shape().0));
        for (k, &t) in distinct.iter().enumerate() {
            for &(r, v) in &self.composition[t] {
                tri.add_triplet(k, r, v);
            }
        }
        let c: CsMat<f64> = tri.to_csr();
        let c = SparseMatrix::from_csmat(backend, &c)?;
        let words = Var::spmm(&c, &tape.param(&self.weight), false)?;
        words.gather_rows(&Index::new(backend, &pos)?)
    }
}

impl<B: Backend> Module<B> for SubwordEmbedding<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.param("weight", &self.weight);
    }
}
