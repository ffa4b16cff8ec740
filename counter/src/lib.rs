//! The counter demo app: GET/POST /api/counter against the group's primary Service.
