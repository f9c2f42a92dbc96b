//! The part every typed client shares: a [`Client`](crate::Client) and one
//! program version, with `new`, `connect`, `client`, `with_auth` and the
//! private `call` the procedures go through.

/// `typed_client!(/// doc, Name, PROGRAM, VERSION)`.
macro_rules! typed_client {
    ($(#[$m:meta])* $name:ident, $prog:expr, $vers:expr) => {
        $(#[$m])*
        #[derive(Clone, Debug)]
        pub struct $name {
            client: $crate::Client,
        }

        impl $name {
            pub fn new(client: $crate::Client) -> Self {
                $name { client }
            }

            pub async fn connect(
                addr: std::net::SocketAddr,
                cfg: &$crate::ClientConfig,
            ) -> Result<Self, $crate::ClientError> {
                Ok(Self::new($crate::Client::connect(addr, cfg).await?))
            }

            pub fn client(&self) -> &$crate::Client {
                &self.client
            }

            /// The same connections, calling with `auth`.
            pub fn with_auth(&self, auth: $crate::Auth) -> Self {
                Self::new(self.client.with_auth(auth))
            }

            async fn call<A: rnfsd_xdr::Xdr, R: rnfsd_xdr::Xdr>(
                &self,
                proc_: u32,
                args: &A,
            ) -> Result<R, $crate::ClientError> {
                self.client.call($prog, $vers, proc_, args).await
            }
        }
    };
}

pub(crate) use typed_client;
