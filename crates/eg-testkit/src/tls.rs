//! A certificate authority made per test run, for Redis over TLS: its CA certificate,
//! a server certificate for `127.0.0.1` and `localhost`, and a client certificate (for
//! mutual TLS), written as PEM files into a directory. Redis servers take the files
//! (`--tls-cert-file` …); eg takes the CA as `EG__REDIS__TLS_CA_FILE`.

use base64::Engine;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use std::path::{Path, PathBuf};

/// A certificate and its private key, as PEM files.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A CA and what it issued, as PEM files in one directory.
pub struct TestCa {
    /// The CA certificate: what a client trusts.
    pub ca: PathBuf,
    /// For `127.0.0.1` and `localhost`.
    pub server: Issued,
    /// A client certificate (mutual TLS).
    pub client: Issued,
    issuer: Issuer<'static, KeyPair>,
    dir: PathBuf,
}

impl TestCa {
    /// Makes a CA named `name` and its certificates, written into `dir` (created).
    pub fn generate(dir: &Path, name: &str) -> Self {
        std::fs::create_dir_all(dir).expect("create the CA's directory");
        let key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("a CA certificate");
        let ca = dir.join(format!("{name}-ca.pem"));
        write_pem(&ca, "CERTIFICATE", cert.der());
        let issuer = Issuer::new(params, key);
        let mut ca = Self {
            ca,
            server: Issued {
                cert: PathBuf::new(),
                key: PathBuf::new(),
            },
            client: Issued {
                cert: PathBuf::new(),
                key: PathBuf::new(),
            },
            issuer,
            dir: dir.to_path_buf(),
        };
        ca.server = ca.issue(&format!("{name}-server"), &["127.0.0.1", "localhost"]);
        ca.client = ca.issue(&format!("{name}-client"), &["eg-client"]);
        ca
    }

    /// A certificate for `names` (host names or IP addresses), signed by this CA, written
    /// as `<file>.pem` and `<file>.key`.
    pub fn issue(&self, file: &str, names: &[&str]) -> Issued {
        self.issue_with(file, names, |_| {})
    }

    /// [`TestCa::issue`], with `adjust` applied to the certificate's parameters first.
    fn issue_with(&self, file: &str, names: &[&str], adjust: impl FnOnce(&mut CertificateParams)) -> Issued {
        let key = KeyPair::generate().expect("a key");
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("certificate parameters");
        params.distinguished_name.push(DnType::CommonName, file);
        adjust(&mut params);
        let cert = params.signed_by(&key, &self.issuer).expect("a certificate");
        let issued = Issued {
            cert: self.dir.join(format!("{file}.pem")),
            key: self.dir.join(format!("{file}.key")),
        };
        write_pem(&issued.cert, "CERTIFICATE", cert.der());
        write_pem(&issued.key, "PRIVATE KEY", &key.serialize_der());
        issued
    }

    /// A certificate like [`TestCa::issue`]'s whose validity ended in 2020: what a
    /// deployment meets when nobody renewed one.
    pub fn issue_expired(&self, file: &str, names: &[&str]) -> Issued {
        self.issue_with(file, names, |params| {
            params.not_before = rcgen::date_time_ymd(2019, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 1, 1);
        })
    }
}

pub(crate) fn write_pem(path: &Path, label: &str, der: &[u8]) {
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = format!("-----BEGIN {label}-----\n");
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        pem.push('\n');
    }
    pem.push_str(&format!("-----END {label}-----\n"));
    std::fs::write(path, pem).expect("write a PEM file");
}
