//! The secure port's certificate: the files `--tls-cert-file` and
//! `--tls-private-key-file` name, read again whenever they change (as
//! cert-manager rotates them; a change that does not load keeps the
//! certificate in use), or without them a self-signed certificate made at
//! start-up, as kube-controller-manager does.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::crypto::ring::default_provider;
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{self, ServerConfig};

/// Where the secure port's certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServingCertificate {
    /// One made at start-up, signed by its own key, for `localhost`,
    /// `127.0.0.1`, the host's name and the names given.
    SelfSigned {
        /// Further names (or IP addresses) it is made for.
        names: Vec<String>,
    },
    /// A certificate chain and its private key, in PEM files, read again
    /// when they change.
    Files {
        /// The chain (`--tls-cert-file`), the serving certificate first.
        cert: PathBuf,
        /// Its key (`--tls-private-key-file`).
        key: PathBuf,
    },
}

/// Why the certificate cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// A file cannot be read or holds no PEM of the kind wanted.
    #[error("reading {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The self-signed certificate cannot be made.
    #[error("making a self-signed serving certificate: {0}")]
    Make(#[from] rcgen::Error),
    /// The key does not fit rustls (an unsupported algorithm).
    #[error("loading the serving key: {0}")]
    Key(#[from] rustls::Error),
    /// The key is not the certificate's (its public key is not the one
    /// the certificate names): every handshake would fail.
    #[error("the private key {key} does not belong to the certificate {cert}")]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
}

/// How often the certificate files are looked at for a change.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// The files' modification times and sizes, to tell a change.
type Stamp = Vec<(Option<SystemTime>, u64)>;

/// The certificate in use, and where it came from.
#[derive(Debug)]
pub struct Certificates {
    current: RwLock<Arc<CertifiedKey>>,
    source: ServingCertificate,
    stamp: Mutex<Stamp>,
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        ))
    }
}

fn stamp(paths: &[&Path]) -> Stamp {
    paths
        .iter()
        .map(|path| match std::fs::metadata(path) {
            Ok(meta) => (meta.modified().ok(), meta.len()),
            Err(_) => (None, 0),
        })
        .collect()
}

fn read_error(path: &Path, reason: &dyn std::fmt::Display) -> CertificateError {
    CertificateError::Read {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn certified(
    chain: Vec<CertificateDer<'static>>,
    key: &PrivateKeyDer<'static>,
) -> Result<Arc<CertifiedKey>, CertificateError> {
    let signing = default_provider()
        .key_provider
        .load_private_key(key.clone_key())?;
    Ok(Arc::new(CertifiedKey::new(chain, signing)))
}

fn from_files(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, CertificateError> {
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| read_error(cert, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| read_error(cert, &e))?;
    if chain.is_empty() {
        return Err(read_error(cert, &"no CERTIFICATE in the file"));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| read_error(key, &e))?;
    let certified = certified(chain, &key_der)?;
    match certified.keys_match() {
        // A key whose public half rustls cannot tell is taken as it is.
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
            Ok(certified)
        }
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
            Err(CertificateError::Mismatch {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
            })
        }
        Err(error) => Err(read_error(cert, &error)),
    }
}

fn self_signed(names: &[String]) -> Result<Arc<CertifiedKey>, CertificateError> {
    let mut all = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    if let Ok(host) = std::env::var("HOSTNAME")
        && !host.is_empty()
    {
        all.push(host);
    }
    all.extend(names.iter().cloned());
    all.dedup();
    let made = rcgen::generate_simple_self_signed(all)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
    certified(vec![made.cert.der().clone()], &key)
}

impl Certificates {
    /// The certificate of `source`, loaded or made now.
    pub fn load(source: ServingCertificate) -> Result<Arc<Self>, CertificateError> {
        let (current, stamp) = match &source {
            ServingCertificate::SelfSigned { names } => (self_signed(names)?, Stamp::new()),
            ServingCertificate::Files { cert, key } => {
                let stamp = stamp(&[cert, key]);
                (from_files(cert, key)?, stamp)
            }
        };
        Ok(Arc::new(Self {
            current: RwLock::new(current),
            source,
            stamp: Mutex::new(stamp),
        }))
    }

    /// The TLS settings of a server presenting this certificate (HTTP/1.1).
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, CertificateError> {
        let mut config = ServerConfig::builder_with_provider(Arc::new(default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(self) as Arc<dyn ResolvesServerCert>);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// Reads the files again when they changed since last read; returns
    /// whether a new certificate is in use. A change that does not load is
    /// logged and the certificate in use kept (a rotation writes the two
    /// files one after the other).
    pub fn reload_if_changed(&self) -> bool {
        let ServingCertificate::Files { cert, key } = &self.source else {
            return false;
        };
        let now = stamp(&[cert, key]);
        let mut seen = self
            .stamp
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *seen == now {
            return false;
        }
        match from_files(cert, key) {
            Ok(loaded) => {
                *seen = now;
                *self
                    .current
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = loaded;
                tracing::info!(cert = %cert.display(), "serving certificate reloaded");
                true
            }
            Err(error) => {
                tracing::warn!(%error, "serving certificate changed but does not load; keeping the one in use");
                false
            }
        }
    }

    /// Looks at the files every [`RELOAD_INTERVAL`] until dropped.
    pub async fn watch(self: Arc<Self>) {
        if !matches!(self.source, ServingCertificate::Files { .. }) {
            return;
        }
        let mut every = tokio::time::interval(RELOAD_INTERVAL);
        loop {
            every.tick().await;
            self.reload_if_changed();
        }
    }

    /// The leaf certificate in use.
    #[cfg(test)]
    pub(crate) fn leaf(&self) -> CertificateDer<'static> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .cert[0]
            .clone()
    }
}

#[cfg(test)]
mod tests;
