//! nena-analyze: placeholder until its issue lands.
