//! What the three local models share: a model folder laid out by `deploy/embeddings.sh`
//! (`model.onnx` and the four tokenizer files fastembed reads), and one single-threaded
//! session per core that a call shares its texts out to.

use crate::local::{absolute, check_ort_dylib, ort_dylib_path};
use crate::EmbedError;
use fastembed::TokenizerFiles;
use std::path::{Path, PathBuf};

/// Each file of a model folder, with the role it plays (named in error messages).
const MODEL_FILE: (&str, &str) = ("model", "model.onnx");
const TOKENIZER_FILE: (&str, &str) = ("tokenizer", "tokenizer.json");
const CONFIG_FILE: (&str, &str) = ("model config", "config.json");
const SPECIAL_TOKENS_FILE: (&str, &str) = ("special tokens map", "special_tokens_map.json");
const TOKENIZER_CONFIG_FILE: (&str, &str) = ("tokenizer config", "tokenizer_config.json");
const MODEL_FILES: [(&str, &str); 5] = [
    MODEL_FILE,
    TOKENIZER_FILE,
    CONFIG_FILE,
    SPECIAL_TOKENS_FILE,
    TOKENIZER_CONFIG_FILE,
];

/// A model folder whose files are all there, and the ONNX Runtime library to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModelFolder {
    pub dir: PathBuf,
    pub ort_dylib: PathBuf,
}

impl ModelFolder {
    /// `dir` and the library made absolute (`ORT_DYLIB_PATH` when `ort_dylib` is empty), and
    /// every file checked, so that a missing one is reported by name — through `missing`, the
    /// model's own error — before anything is loaded.
    pub fn resolve(
        dir: &Path,
        ort_dylib: &Path,
        missing: fn(&'static str, PathBuf) -> EmbedError,
    ) -> Result<ModelFolder, EmbedError> {
        let dir = absolute(dir);
        if !dir.is_dir() {
            return Err(missing("model folder", dir));
        }
        for (what, name) in MODEL_FILES {
            let path = dir.join(name);
            if !path.is_file() {
                return Err(missing(what, path));
            }
        }
        let ort_dylib = ort_dylib_path(ort_dylib)?;
        check_ort_dylib(&ort_dylib)?;
        Ok(ModelFolder { dir, ort_dylib })
    }

    pub fn model(&self) -> Result<Vec<u8>, EmbedError> {
        self.read(MODEL_FILE)
    }

    pub fn tokenizer_files(&self) -> Result<TokenizerFiles, EmbedError> {
        Ok(TokenizerFiles {
            tokenizer_file: self.read(TOKENIZER_FILE)?,
            config_file: self.read(CONFIG_FILE)?,
            special_tokens_map_file: self.read(SPECIAL_TOKENS_FILE)?,
            tokenizer_config_file: self.read(TOKENIZER_CONFIG_FILE)?,
        })
    }

    fn read(&self, (what, name): (&'static str, &str)) -> Result<Vec<u8>, EmbedError> {
        let path = self.dir.join(name);
        std::fs::read(&path).map_err(|source| EmbedError::Read { what, path, source })
    }
}

/// Runs `run` over `items` in `parts` contiguous shares (at most; at least one) at once, and
/// returns the results in input order. `run` gets its part's number (below `parts`: the
/// session it may use), its share and the share's first index in `items`. A single share runs
/// on the calling thread.
pub(crate) fn share_out<T: Sync, R: Send>(
    parts: usize,
    items: &[T],
    who: &str,
    run: impl Fn(usize, &[T], usize) -> Result<Vec<R>, EmbedError> + Sync,
) -> Result<Vec<R>, EmbedError> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let share = items.len().div_ceil(parts.max(1));
    if share == items.len() {
        return run(0, items, 0);
    }
    let run = &run;
    std::thread::scope(|scope| {
        let running: Vec<_> = items
            .chunks(share)
            .enumerate()
            .map(|(k, chunk)| scope.spawn(move || run(k, chunk, k * share)))
            .collect();
        running
            .into_iter()
            .map(|thread| {
                thread.join().unwrap_or_else(|_| {
                    Err(EmbedError::Inference(format!("{who}: a thread panicked")))
                })
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .map(|shares| shares.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_run_on_every_session_and_come_back_in_input_order() {
        let sessions = ['a', 'b'];
        let items: Vec<u32> = (0..5).collect();
        let out = share_out(2, &items, "test", |part, share, offset| {
            let name = sessions[part];
            Ok(share
                .iter()
                .enumerate()
                .map(|(i, x)| (name, offset + i, *x))
                .collect())
        })
        .unwrap();
        assert_eq!(
            out,
            [
                ('a', 0, 0),
                ('a', 1, 1),
                ('a', 2, 2),
                ('b', 3, 3),
                ('b', 4, 4)
            ]
        );
        let one = share_out(1, &items, "test", |_, share, _| Ok(share.to_vec())).unwrap();
        assert_eq!(one, items);
        let none: Vec<u32> = share_out(2, &[], "test", |_, s: &[u32], _| Ok(s.to_vec())).unwrap();
        assert!(none.is_empty());
    }

    #[test]
    fn a_failing_share_fails_the_call() {
        let result = share_out(2, &[1, 2, 3, 4], "test", |_, share, _| {
            if share.contains(&4) {
                Err(EmbedError::Inference("bad".into()))
            } else {
                Ok(share.to_vec())
            }
        });
        assert!(matches!(result, Err(EmbedError::Inference(m)) if m == "bad"));
    }

    #[test]
    fn a_missing_file_is_named_through_the_models_own_error() {
        let dir = std::env::temp_dir().join(format!("deja-folder-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("model.onnx"), b"x").unwrap();
        let err = ModelFolder::resolve(&dir, Path::new("/nonexistent/ort.so"), |what, path| {
            EmbedError::MissingLateFile { what, path }
        })
        .unwrap_err();
        assert!(
            matches!(
                &err,
                EmbedError::MissingLateFile {
                    what: "tokenizer",
                    ..
                }
            ),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
