//! Late interaction: how much of a query one episode covers, word piece by word piece.
//!
//! An encoder (answerai-colbert-small-v1, `deja_embed::LateEncoder`) turns a text into one
//! vector per word piece, each already read in the context of its whole text. The episode's
//! vectors are computed once, when its text is written, and stored beside it; a search
//! encodes only the query. The score is ColBERT's MaxSim: for every query piece, the
//! cosine of the episode piece most like it, averaged over the query. A query is covered
//! when each of its pieces finds its counterpart somewhere in the episode — "timesyncd"
//! and "NTP", "drift" and "skew" — which a single embedding of the whole text blurs.
//! Unlike a cross-encoder, no model runs per (query, episode) pair: scoring a candidate is
//! a few hundred thousand multiply-adds.
//!
//! Stored vectors are 8-bit: each piece as one f32 scale and `dims` signed bytes
//! ([`TokenVectors::to_bytes`]); the score moves by less than 0.01 (measured on the eval
//! corpus: the same ranking).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One vector per word piece of a text, each of unit length, row after row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenVectors {
    dims: usize,
    data: Vec<f32>,
}

/// Why token vectors could not be built or read back.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenVectorsError {
    #[error("token vectors need at least one dimension")]
    NoDimensions,
    #[error("{len} values do not make rows of {dims}")]
    Ragged { len: usize, dims: usize },
    #[error("a token vector holds a value that is not finite")]
    NotFinite,
    #[error("{len} stored bytes do not make rows of {dims} dimensions and a scale")]
    BadEncoding { len: usize, dims: usize },
}

/// Bytes a row takes when stored: its f32 scale, then one signed byte per dimension.
const SCALE_BYTES: usize = 4;

impl TokenVectors {
    /// Rows of `dims` values from `data` (row after row), each scaled to unit length; a row
    /// of zeros stays zeros (it matches nothing).
    pub fn new(dims: usize, mut data: Vec<f32>) -> Result<Self, TokenVectorsError> {
        if dims == 0 {
            return Err(TokenVectorsError::NoDimensions);
        }
        if !data.len().is_multiple_of(dims) {
            return Err(TokenVectorsError::Ragged {
                len: data.len(),
                dims,
            });
        }
        if data.iter().any(|x| !x.is_finite()) {
            return Err(TokenVectorsError::NotFinite);
        }
        for row in data.chunks_mut(dims) {
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                row.iter_mut().for_each(|x| *x /= norm);
            }
        }
        Ok(TokenVectors { dims, data })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// How many word pieces.
    pub fn len(&self) -> usize {
        self.data.len() / self.dims
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn rows(&self) -> impl Iterator<Item = &[f32]> {
        self.data.chunks_exact(self.dims)
    }

    /// The stored form: per row, its largest magnitude / 127 as a little-endian f32, then
    /// each value divided by it, rounded to a signed byte.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.len() * (SCALE_BYTES + self.dims));
        for row in self.rows() {
            let largest = row.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            let scale = if largest > 0.0 { largest / 127.0 } else { 1.0 };
            bytes.extend_from_slice(&scale.to_le_bytes());
            bytes.extend(row.iter().map(|x| {
                // In [-127, 127] by construction of `scale`.
                let q = (x / scale).round().clamp(-127.0, 127.0) as i8;
                q.to_le_bytes()[0]
            }));
        }
        bytes
    }

    /// Reads [`TokenVectors::to_bytes`] back (rows renormalized: rounding shortens them
    /// slightly).
    pub fn from_bytes(dims: usize, bytes: &[u8]) -> Result<Self, TokenVectorsError> {
        if dims == 0 {
            return Err(TokenVectorsError::NoDimensions);
        }
        let row_bytes = SCALE_BYTES + dims;
        if !bytes.len().is_multiple_of(row_bytes) {
            return Err(TokenVectorsError::BadEncoding {
                len: bytes.len(),
                dims,
            });
        }
        let mut data = Vec::with_capacity(bytes.len() / row_bytes * dims);
        for row in bytes.chunks_exact(row_bytes) {
            let (scale, values) = row.split_at(SCALE_BYTES);
            let scale = f32::from_le_bytes([scale[0], scale[1], scale[2], scale[3]]);
            data.extend(
                values
                    .iter()
                    .map(|b| f32::from(i8::from_le_bytes([*b])) * scale),
            );
        }
        TokenVectors::new(dims, data)
    }
}

/// ColBERT's MaxSim: the mean, over the query's pieces, of the best cosine with any of the
/// document's pieces. In [-1, 1], 1 when every query piece has an identical counterpart.
/// `None` when either side is empty or their dimensions differ (nothing comparable).
pub fn max_sim(query: &TokenVectors, document: &TokenVectors) -> Option<f64> {
    if query.is_empty() || document.is_empty() || query.dims != document.dims {
        return None;
    }
    let total: f64 = query
        .rows()
        .map(|q| {
            document
                .rows()
                .map(|d| dot(q, d))
                .fold(f32::NEG_INFINITY, f32::max)
        })
        .map(f64::from)
        .sum();
    Some(total / query.len() as f64)
}

/// Dot product in eight independent lanes: a single running sum is a dependency chain the
/// compiler may not reorder (float addition is not associative), eight of them vectorize.
/// A search compares ~30 query pieces with ~150 pieces of each of ten candidates.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut lanes = [0.0f32; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..LANES {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// What stored token vectors were computed from, so that a reader can tell vectors of an
/// older text (or another model) from current ones: the first 16 hex digits of
/// SHA-256(model id, NUL, text).
pub fn source_stamp(model_id: &str, text: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(model_id.as_bytes());
    hash.update([0]);
    hash.update(text.as_bytes());
    hex::encode(&hash.finalize()[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vectors(rows: &[&[f32]]) -> TokenVectors {
        let dims = rows[0].len();
        TokenVectors::new(dims, rows.concat()).expect("valid")
    }

    #[test]
    fn rows_are_scaled_to_unit_length() {
        let v = vectors(&[&[3.0, 4.0], &[0.0, 0.0]]);
        let rows: Vec<&[f32]> = v.rows().collect();
        assert_eq!(rows[0], [0.6, 0.8]);
        assert_eq!(rows[1], [0.0, 0.0]);
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn max_sim_averages_each_query_piece_best_match() {
        let document = vectors(&[&[1.0, 0.0, 0.0], &[0.0, 1.0, 0.0]]);
        // The first piece is in the document, the second is orthogonal to all of it.
        let query = vectors(&[&[1.0, 0.0, 0.0], &[0.0, 0.0, 1.0]]);
        assert_eq!(max_sim(&query, &document), Some(0.5));
        // Every piece covered, whatever the order or repetition.
        let covered = vectors(&[&[0.0, 1.0, 0.0], &[1.0, 0.0, 0.0], &[1.0, 0.0, 0.0]]);
        assert_eq!(max_sim(&covered, &document), Some(1.0));
    }

    #[test]
    fn the_lane_dot_product_is_the_plain_one() {
        // Lengths around the lane width, so the remainder path runs too.
        for len in [1usize, 7, 8, 9, 17, 384] {
            let a: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - plain).abs() < 1e-4, "len {len}");
        }
    }

    #[test]
    fn max_sim_is_none_for_nothing_comparable() {
        let two = vectors(&[&[1.0, 0.0]]);
        let three = vectors(&[&[1.0, 0.0, 0.0]]);
        let empty = TokenVectors::new(2, Vec::new()).expect("empty is valid");
        assert_eq!(max_sim(&two, &three), None);
        assert_eq!(max_sim(&empty, &two), None);
        assert_eq!(max_sim(&two, &empty), None);
    }

    #[test]
    fn the_stored_form_reads_back_within_rounding() {
        let v = vectors(&[&[0.3, -0.9, 0.1, 0.05], &[-1.0, 0.0, 0.2, 0.7], &[0.0; 4]]);
        let bytes = v.to_bytes();
        assert_eq!(bytes.len(), 3 * (4 + 4));
        let back = TokenVectors::from_bytes(4, &bytes).expect("decodes");
        assert_eq!(back.len(), 3);
        for (a, b) in v.rows().zip(back.rows()) {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() < 0.01, "{x} vs {y}");
            }
        }
        let score = max_sim(&v, &v).expect("comparable");
        let stored = max_sim(&v, &back).expect("comparable");
        assert!((score - stored).abs() < 0.005, "{score} vs {stored}");
    }

    #[test]
    fn malformed_input_is_refused_with_its_reason() {
        assert_eq!(
            TokenVectors::new(0, vec![]),
            Err(TokenVectorsError::NoDimensions)
        );
        assert_eq!(
            TokenVectors::new(3, vec![1.0; 4]),
            Err(TokenVectorsError::Ragged { len: 4, dims: 3 })
        );
        assert_eq!(
            TokenVectors::new(1, vec![f32::NAN]),
            Err(TokenVectorsError::NotFinite)
        );
        assert_eq!(
            TokenVectors::from_bytes(4, &[0; 9]),
            Err(TokenVectorsError::BadEncoding { len: 9, dims: 4 })
        );
        // A corrupted scale that is not finite is refused, not propagated into scores.
        let mut bytes = vectors(&[&[1.0, 0.0]]).to_bytes();
        bytes[..4].copy_from_slice(&f32::INFINITY.to_le_bytes());
        assert_eq!(
            TokenVectors::from_bytes(2, &bytes),
            Err(TokenVectorsError::NotFinite)
        );
    }

    #[test]
    fn the_stamp_changes_with_the_text_and_the_model() {
        let stamp = source_stamp("colbert", "redis evictions");
        assert_eq!(stamp.len(), 16);
        assert_eq!(stamp, source_stamp("colbert", "redis evictions"));
        assert_ne!(stamp, source_stamp("colbert", "redis eviction"));
        assert_ne!(stamp, source_stamp("other", "redis evictions"));
    }
}
