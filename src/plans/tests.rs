//! Tests of the plan book.
