//! The `explain` command's client of the secure admin port: one GET over
//! HTTPS with a bearer token (the port authenticates and authorizes every
//! path but the health checks), the server's certificate checked against
//! the authority given, or not at all when asked (the port's certificate
//! is self-signed unless the flags name one), as kubectl's
//! `--certificate-authority` and `--insecure-skip-tls-verify`.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{self, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{
    self, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use super::ExplainError;

/// A running controller's secure admin port, and how to ask it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminEndpoint {
    /// `https://HOST:PORT`.
    pub address: String,
    /// The bearer token sent (a token the API server authenticates, for a
    /// user granted `get` on `/explain/*`).
    pub token: Option<String>,
    /// A PEM file of the authority the port's certificate is checked
    /// against.
    pub certificate_authority: Option<PathBuf>,
    /// Accept whatever certificate the port shows (its self-signed one).
    pub insecure_skip_tls_verify: bool,
}

impl AdminEndpoint {
    /// `HOST:PORT` of the address.
    fn host(&self) -> Result<&str, ExplainError> {
        self.address
            .strip_prefix("https://")
            .map(|rest| rest.trim_end_matches('/'))
            .filter(|host| !host.is_empty() && !host.contains('/'))
            .ok_or_else(|| ExplainError::Address(self.address.clone()))
    }

    /// The TLS settings the flags ask for.
    fn tls(&self) -> Result<ClientConfig, ExplainError> {
        let provider = Arc::new(crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|error| ExplainError::Tls(error.to_string()))?;
        let config = match (&self.certificate_authority, self.insecure_skip_tls_verify) {
            (Some(path), _) => {
                let mut roots = RootCertStore::empty();
                let certificates = CertificateDer::pem_file_iter(path)
                    .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                    .map_err(|error| {
                        ExplainError::Tls(format!("reading {}: {error}", path.display()))
                    })?;
                for certificate in certificates {
                    roots.add(certificate).map_err(|error| {
                        ExplainError::Tls(format!("{}: {error}", path.display()))
                    })?;
                }
                builder.with_root_certificates(roots)
            }
            (None, true) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider))),
            (None, false) => return Err(ExplainError::Tls(
                "the port's certificate cannot be checked: give --certificate-authority, or --insecure-skip-tls-verify for its self-signed one".to_string(),
            )),
        };
        Ok(config.with_no_client_auth())
    }

    /// GETs `path`: the answer's status line and body.
    pub(super) async fn get(&self, path: &str) -> Result<(String, String), ExplainError> {
        let host = self.host()?;
        let connector = TlsConnector::from(Arc::new(self.tls()?));
        let name = host
            .rsplit_once(':')
            .map_or(host, |(name, _)| name)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let server = ServerName::try_from(name.to_string())
            .map_err(|_| ExplainError::Address(self.address.clone()))?;
        let io = |source| ExplainError::Io {
            address: self.address.clone(),
            source,
        };
        let authorization = self
            .token
            .as_ref()
            .map(|token| format!("Authorization: Bearer {token}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\n{authorization}Accept: application/json\r\nConnection: close\r\n\r\n"
        );
        let exchange = async {
            let tcp = TcpStream::connect(host).await?;
            let mut tls = connector.connect(server, tcp).await?;
            tls.write_all(request.as_bytes()).await?;
            tls.flush().await?;
            let mut raw = Vec::new();
            // A server that closes without TLS's close_notify still said
            // all it had to say.
            match tls.read_to_end(&mut raw).await {
                Err(error) if error.kind() != std::io::ErrorKind::UnexpectedEof => {
                    return Err(error);
                }
                _ => {}
            }
            Ok::<_, std::io::Error>(raw)
        };
        let raw = tokio::time::timeout(super::ANSWER_TIMEOUT, exchange)
            .await
            .map_err(|_| io(std::io::ErrorKind::TimedOut.into()))?
            .map_err(io)?;
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.lines().next().unwrap_or_default().to_string();
        Ok((status, body.to_string()))
    }
}

/// Accepts the port's certificate whatever it is (asked for with
/// `--insecure-skip-tls-verify`); the handshake's signatures are still
/// checked.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
