-- model.lua: the sample fetch lua.sluice_multipart_model for
-- deploy/haproxy/haproxy.cfg. It reads the value of the part named
-- "model" of a multipart/form-data request body (how README's curl and
-- the openai SDKs send transcriptions), so that the proxy hashes an upload
-- to the replica its model lives on, as it does for JSON, query and path
-- requests.
--
-- Only the part of the body HAProxy has buffered is read (http-request
-- wait-for-body; at most tune.bufsize less tune.maxrewrite bytes):
-- a model field after a file larger than that is not seen, and the
-- request falls back to the client's X-Sluice-Model header, else to
-- round-robin (haproxy.cfg says more). Lua and not a regex: the body is
-- binary, and HAProxy 2.6 cuts a binary sample at its first NUL byte when
-- a converter takes it as a string; Lua strings hold any byte.
--
-- The value must be a model ID as Sluice accepts it ([A-Za-z0-9._-],
-- 1..128 bytes); anything else is ignored, so a hostile body can only
-- choose a replica, never smuggle bytes into a header.

local function multipart_model(txn)
    local ct = txn.f:req_hdr("content-type")
    if ct == nil then
        return nil
    end
    local lower = ct:lower()
    if lower:find("multipart/form-data", 1, true) ~= 1 then
        return nil
    end
    -- The boundary parameter, quoted or not (RFC 2046: 1..70 bytes).
    local at = lower:find("boundary=", 1, true)
    if at == nil then
        return nil
    end
    local boundary = ct:sub(at + 9)
    if boundary:sub(1, 1) == '"' then
        boundary = boundary:match('^"([^"]*)"')
    else
        boundary = boundary:match("^([^;%s]*)")
    end
    if boundary == nil or #boundary == 0 or #boundary > 70 then
        return nil
    end
    local body = txn.f:req_body()
    if body == nil or #body == 0 then
        return nil
    end
    local delim = "\r\n--" .. boundary
    -- The first delimiter may open the body without its CRLF.
    local pos
    if body:sub(1, #delim - 2) == delim:sub(3) then
        pos = #delim - 1
    else
        local s, e = body:find(delim, 1, true)
        if s == nil then
            return nil
        end
        pos = e + 1
    end
    while true do
        -- pos is just past a delimiter: "--" closes the body, CRLF opens
        -- the part's headers.
        if body:sub(pos, pos + 1) ~= "\r\n" then
            return nil
        end
        local hend = body:find("\r\n\r\n", pos, true)
        if hend == nil then
            return nil
        end
        local headers = body:sub(pos + 2, hend + 1):lower()
        local vstart = hend + 4
        local nexts, nexte = body:find(delim, vstart, true)
        if nexts == nil then
            return nil -- the rest of the body was not buffered
        end
        for line in headers:gmatch("([^\r\n]*)\r\n") do
            if line:find("^content%-disposition:") and
                (line:find(';%s*name="model"') or line:find(";%s*name=model$") or line:find(";%s*name=model;")) then
                local v = body:sub(vstart, nexts - 1)
                if #v >= 1 and #v <= 128 and v:find("^[A-Za-z0-9._-]+$") and v ~= "." and v ~= ".." then
                    return v
                end
                return nil
            end
        end
        pos = nexte + 1
    end
end

-- HAProxy turns a Lua nil into the integer 0, a sample like any other:
-- nothing found is the empty string, which haproxy.cfg skips.
core.register_fetches("sluice_multipart_model", function(txn)
    return multipart_model(txn) or ""
end)
