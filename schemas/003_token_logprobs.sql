-- Migration 3: per-token log-probabilities, for requests that ask for them (the OpenAI API's
-- `logprobs` and `top_logprobs`). Written in the same commit as the token, so a resumed item
-- has them for every stored token; NULL when the item did not ask.
--
--   logprobs = f32 logprob, then top_logprobs x (i32 id, f32 logprob)   little-endian
--
-- logprob is the generated token's log-softmax under the model's raw logits (before
-- temperature, top-k, top-p); the pairs are the most likely ids, most likely first.
ALTER TABLE tokens ADD COLUMN logprobs BLOB;
