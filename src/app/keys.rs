//! Where the state key ring comes from: the inline keys (`state.keys`), then the key file's
//! (`state.key_file`), derived into one [`KeyRing`] at start and again, whole, whenever the key
//! file is reloaded (`reload.rs`). With no key at all the gateway runs on one ephemeral key,
//! loudly. Errors name the file and the line, never a key.

use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};
use zeroize::Zeroizing;

use crate::config::{KeyLine, StateConfig};
use crate::mrtr::{parse_key_lines, KeyError, KeyRing, KeySecret};

/// SHA-256 of a key file's bytes: how a reload tells new content from old without keeping the
/// keys themselves around.
pub(crate) type FileDigest = [u8; 32];

/// Why a key file, or the ring built with it, was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} holds no key")]
    NoKey { path: String },
    #[error("{source_name}: {source}")]
    Key { source_name: String, source: KeyError },
    #[error("state key ring: {0}")]
    Ring(KeyError),
}

/// The configured keys: the inline ones, fixed for the process's life, and the file's path.
#[derive(Debug, Clone)]
pub(crate) struct KeySource {
    inline: Vec<KeyLine>,
    file: Option<PathBuf>,
}

/// A key file as read: its text (wiped on drop) and its digest.
pub(crate) struct FileContent {
    text: Zeroizing<String>,
    pub(crate) digest: FileDigest,
}

// === impl KeySource ===

impl KeySource {
    pub(crate) fn new(state: &StateConfig) -> Self {
        let inline = state.keys.iter().filter(|line| !line.from_file).cloned().collect();
        Self { inline, file: state.key_file.clone() }
    }

    /// The key file, when one is configured.
    pub(crate) fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The ring at start, and the digest of the key file it read. No key at all: an
    /// ephemeral ring.
    pub(crate) fn initial(&self) -> Result<(KeyRing, Option<FileDigest>), KeyFileError> {
        let content = match &self.file {
            Some(path) => Some(FileContent::from_bytes(path, read(path)?)?),
            None => None,
        };
        if self.inline.is_empty() && content.is_none() {
            tracing::warn!(
                "NO STATE KEY CONFIGURED: using an ephemeral key. input_required retries and legacy \
                 sessions will fail on other replicas and after a restart. Set state.keys, \
                 MRTR_GATEWAY__STATE__KEYS or --state-key-file."
            );
            return KeyRing::ephemeral().map(|ring| (ring, None)).map_err(KeyFileError::Ring);
        }
        let ring = self.ring(content.as_ref())?;
        tracing::info!(key_ids = ?ids(&ring), "state key ring loaded (first key seals)");
        Ok((ring, content.map(|c| c.digest)))
    }

    /// Derives the ring of the inline keys followed by `file`'s: each key once, here, never per
    /// request.
    pub(crate) fn ring(&self, file: Option<&FileContent>) -> Result<KeyRing, KeyFileError> {
        let mut secrets = Vec::new();
        for line in &self.inline {
            secrets.extend(parse(&line.source, line.text.expose())?);
        }
        if let (Some(path), Some(content)) = (&self.file, file) {
            let source_name = format!("state.key_file {}", path.display());
            secrets.extend(parse(&source_name, &content.text)?);
        }
        KeyRing::new(secrets).map_err(KeyFileError::Ring)
    }
}

// === impl FileContent ===

impl FileContent {
    /// Checks that the file is text holding at least one key line.
    pub(crate) fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Self, KeyFileError> {
        let digest = digest(&bytes);
        let text = String::from_utf8(bytes).map_err(|e| {
            let _wiped = Zeroizing::new(e.into_bytes());
            let source = std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text");
            KeyFileError::Read { path: path.display().to_string(), source }
        })?;
        let text = Zeroizing::new(text);
        let has_key = text.lines().map(str::trim).any(|l| !l.is_empty() && !l.starts_with('#'));
        if !has_key {
            return Err(KeyFileError::NoKey { path: path.display().to_string() });
        }
        Ok(Self { text, digest })
    }
}

/// The digest of a key file's bytes.
pub(crate) fn digest(bytes: &[u8]) -> FileDigest {
    Sha256::digest(bytes).into()
}

/// The ids of `ring`, sealing key first, for logs.
pub(crate) fn ids(ring: &KeyRing) -> Vec<String> {
    ring.ids().map(|id| id.to_string()).collect()
}

fn read(path: &Path) -> Result<Vec<u8>, KeyFileError> {
    std::fs::read(path).map_err(|source| KeyFileError::Read { path: path.display().to_string(), source })
}

fn parse(source_name: &str, text: &str) -> Result<Vec<KeySecret>, KeyFileError> {
    parse_key_lines(text).map_err(|source| KeyFileError::Key { source_name: source_name.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;

    use super::*;
    use crate::config::Secret;

    fn key(label: &str, byte: u8) -> String {
        format!("{label}:{}", STANDARD.encode([byte; 32]))
    }

    fn source(inline: &[String], file: Option<&Path>) -> KeySource {
        let inline = inline
            .iter()
            .enumerate()
            .map(|(i, k)| KeyLine {
                source: format!("state.keys[{i}]"),
                text: Secret::new(k.clone()),
                from_file: false,
            })
            .collect();
        KeySource { inline, file: file.map(Path::to_path_buf) }
    }

    #[test]
    fn the_file_follows_the_inline_keys_and_its_digest_tracks_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        std::fs::write(&path, format!("# newest first\n{}\n{}\n", key("b", 2), key("a", 1))).unwrap();
        let (ring, digest) = source(&[key("inline", 9)], Some(&path)).initial().unwrap();
        assert_eq!(ring.len(), 3);
        let only_file = source(&[], Some(&path)).initial().unwrap().0;
        assert_eq!(ring.ids().nth(1), Some(only_file.sealing_id()));
        let again = FileContent::from_bytes(&path, std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(Some(again.digest), digest);
        let other = FileContent::from_bytes(&path, key("c", 3).into_bytes()).unwrap();
        assert_ne!(Some(other.digest), digest);
    }

    #[test]
    fn bad_files_are_refused_naming_the_line_not_the_key() {
        let path = Path::new("keys");
        let err = FileContent::from_bytes(path, b"# only a comment\n\n".to_vec()).err().unwrap();
        assert!(matches!(err, KeyFileError::NoKey { .. }), "{err}");
        let err = FileContent::from_bytes(path, vec![0xff, 0xfe, b'\n']).err().unwrap();
        assert!(matches!(err, KeyFileError::Read { .. }), "{err}");
        let short = STANDARD.encode([7u8; 16]);
        let content = FileContent::from_bytes(path, format!("{}\n{short}\n", key("a", 1)).into()).unwrap();
        let err = source(&[], Some(path)).ring(Some(&content)).err().unwrap();
        assert!(err.to_string().contains("line 2") && !err.to_string().contains(&short), "{err}");
        let dup = FileContent::from_bytes(path, format!("{}\n", key("x", 1)).into()).unwrap();
        let err = source(&[key("x", 2)], Some(path)).ring(Some(&dup)).err().unwrap();
        assert!(matches!(err, KeyFileError::Ring(KeyError::DuplicateId(_))), "{err}");
        let missing = source(&[], Some(Path::new("/nonexistent/keys"))).initial().err().unwrap();
        assert!(matches!(missing, KeyFileError::Read { .. }), "{missing}");
    }

    #[test]
    fn no_key_at_all_means_one_ephemeral_key() {
        let (ring, digest) = source(&[], None).initial().unwrap();
        assert_eq!((ring.len(), digest), (1, None));
    }
}
