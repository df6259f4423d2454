//! The requests sent through nginx to make the fixtures in `tests/fixtures/`
//! (`nginx_capture.rs` sends them, `nginx_fixtures.rs` checks the result).

/// Fixture made from [`GET_REQUEST`].
pub const GET_FIXTURE: &str = "nginx_get_query.bin";
/// Fixture made from [`post_request`].
pub const POST_FIXTURE: &str = "nginx_post_body.bin";

/// Path of the (never executed) script both requests name.
pub const SCRIPT_PATH: &str = "/cgi-bin/fixture.cgi";
/// Query string of the GET request.
pub const GET_QUERY: &str = "name=corral&list=a%20b&empty=&utf8=%C3%A9";
/// Query string of the POST request.
pub const POST_QUERY: &str = "mode=post";
/// `Proxy:` header of the GET request: nginx forwards it as `HTTP_PROXY`,
/// which the CGI environment must drop (httpoxy).
pub const PROXY_HEADER: &str = "http://attacker.invalid:3128";
/// `Cookie:` header of the GET request: over 127 bytes, so nginx encodes
/// the `HTTP_COOKIE` value length in 4 bytes.
pub fn cookie_header() -> String {
    format!("session={}", "c0ffee".repeat(30))
}
/// Content type of the POST body.
pub const POST_CONTENT_TYPE: &str = "application/x-www-form-urlencoded";

/// The GET request, as sent to nginx.
pub fn get_request() -> String {
    format!(
        "GET {SCRIPT_PATH}?{GET_QUERY} HTTP/1.1\r\n\
         Host: fixture.test\r\n\
         User-Agent: corral-fixture/1\r\n\
         Accept: */*\r\n\
         Proxy: {PROXY_HEADER}\r\n\
         Cookie: {}\r\n\
         Connection: close\r\n\r\n",
        cookie_header()
    )
}

/// The POST body: several hundred bytes of form data, ending in escaped
/// NUL and 0xFF bytes.
pub fn post_body() -> Vec<u8> {
    let mut body = Vec::new();
    for i in 0..40 {
        body.extend_from_slice(format!("field{i}=value%20{i}&").as_bytes());
    }
    body.extend_from_slice(b"end=%00%FF");
    body
}

/// The POST request, as sent to nginx.
pub fn post_request() -> Vec<u8> {
    let body = post_body();
    let mut request = format!(
        "POST {SCRIPT_PATH}?{POST_QUERY} HTTP/1.1\r\n\
         Host: fixture.test\r\n\
         User-Agent: corral-fixture/1\r\n\
         Content-Type: {POST_CONTENT_TYPE}\r\n\
         Content-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    request
}
