"""pytorch/examples' word_language_model in miniature.

A fixed English paragraph is tokenized into words (a ``Dictionary`` built in
Python, ``<eos>`` after each line) and split into train, validation and test
lines; ``batchify`` lays each split out in columns and ``get_batch`` cuts
``bptt``-long windows (the last one shorter). An ``RNNModel`` (Embedding, a
two-layer ``nn.LSTM`` or ``nn.GRU``, a decoder tied to the embedding) is trained
with NLLLoss on log_softmax, the hidden state carried between batches and
detached by ``repackage_hidden``, ``clip_grad_norm_`` and plain SGD by hand
(``p.data.add_(p.grad, alpha=-lr)``), the learning rate quartered when the
validation loss stops improving; evaluated under ``torch.no_grad()`` in eval
mode and reported as perplexity; then a greedy generation as generate.py does it.
"""

import math

import numpy as np

TEXT = """the quick brown fox jumps over the lazy dog
the dog sleeps in the sun and the fox runs into the woods
a bird sings in the tree above the sleeping dog
the fox hears the bird and looks up at the tree
the sun goes down and the woods grow dark and quiet
the dog wakes up and runs home to eat
the bird flies over the woods and the fox goes to sleep
the quick bird sings and the lazy fox sleeps in the sun
the dog runs over the tree and the bird flies home
at dark the fox looks up and the dog sleeps"""

EMSIZE = 16  # equal to NHID so that the decoder can be tied to the embedding
NHID = 16
NLAYERS = 2
BPTT = 5
BATCH_SIZE = 4
EVAL_BATCH_SIZE = 2
EPOCHS = 4
LR = 20.0
CLIP = 0.25
GENERATE_WORDS = 8


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional

    class Corpus:
        def __init__(self, lines):
            self.dictionary = Dictionary()
            self.train = self.tokenize(lines[:7])
            self.valid = self.tokenize(lines[7:9])
            self.test = self.tokenize(lines[9:])

        def tokenize(self, lines):
            ids = []
            for line in lines:
                words = line.split() + ["<eos>"]
                ids.append(torch.tensor([self.dictionary.add_word(w) for w in words]))
            return torch.cat(ids)

    class RNNModel(nn.Module):
        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.0):
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            self.decoder.weight = self.encoder.weight  # tied weights
            self.init_weights()
            self.rnn_type = rnn_type
            self.nhid = nhid
            self.nlayers = nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == "LSTM":
                return (
                    weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid),
                )
            return weight.new_zeros(self.nlayers, bsz, self.nhid)

    def batchify(data, bsz):
        nbatch = data.size(0) // bsz
        data = data.narrow(0, 0, nbatch * bsz)
        return data.view(bsz, -1).t().contiguous()

    def get_batch(source, i):
        seq_len = min(BPTT, len(source) - 1 - i)
        data = source[i : i + seq_len]
        target = source[i + 1 : i + 1 + seq_len].view(-1)
        return data, target

    def repackage_hidden(h):
        """Wraps hidden states in new Tensors, to detach them from their history."""
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    corpus = Corpus(TEXT.splitlines())
    ntokens = len(corpus.dictionary)
    train_data = batchify(corpus.train, BATCH_SIZE)
    val_data = batchify(corpus.valid, EVAL_BATCH_SIZE)
    test_data = batchify(corpus.test, EVAL_BATCH_SIZE)
    criterion = nn.NLLLoss()

    def train_and_evaluate(rnn_type, rng):
        model = RNNModel(rnn_type, ntokens, EMSIZE, NHID, NLAYERS)
        # the weights come from numpy, so that both libraries start alike
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name != "decoder.bias":
                    values = rng.uniform(-0.1, 0.1, tuple(p.shape))
                    p.copy_(torch.tensor(values, dtype=torch.float32))
        lr = LR

        def train_step(data, targets, hidden):
            model.zero_grad()
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            return loss, hidden

        if compile:
            train_step = compile(train_step)

        def train():
            model.train()
            losses = []
            hidden = model.init_hidden(BATCH_SIZE)
            for i in range(0, train_data.size(0) - 1, BPTT):
                data, targets = get_batch(train_data, i)
                # starting each batch, we detach the hidden state from how it was
                # previously produced, or we would backprop to the start of the dataset
                hidden = repackage_hidden(hidden)
                loss, hidden = train_step(data, targets, hidden)
                losses.append(loss.item())
            return losses

        def evaluate(data_source):
            model.eval()
            total_loss = 0.0
            hidden = model.init_hidden(EVAL_BATCH_SIZE)
            with torch.no_grad():
                for i in range(0, data_source.size(0) - 1, BPTT):
                    data, targets = get_batch(data_source, i)
                    output, hidden = model(data, hidden)
                    hidden = repackage_hidden(hidden)
                    total_loss += len(data) * criterion(output, targets).item()
            return total_loss / (len(data_source) - 1)

        best_val_loss = None
        train_losses, val_ppls, lrs = [], [], []
        for _ in range(EPOCHS):
            train_losses.append(train())
            val_loss = evaluate(val_data)
            val_ppls.append(math.exp(val_loss))
            lrs.append(lr)
            if best_val_loss is None or val_loss < best_val_loss:
                best_val_loss = val_loss
            else:
                lr /= 4.0  # anneal the learning rate if no improvement on validation
        test_loss = evaluate(test_data)

        # generate.py, greedily: feed each most likely word back in
        hidden = model.init_hidden(1)
        input = torch.tensor([[corpus.dictionary.word2idx["the"]]])
        words = ["the"]
        with torch.no_grad():
            for _ in range(GENERATE_WORDS):
                output, hidden = model(input, hidden)
                word_idx = output.argmax().item()
                input.fill_(word_idx)
                words.append(corpus.dictionary.idx2word[word_idx])

        return {
            "parameter_names": [name for name, _ in model.named_parameters()],
            "tied": model.decoder.weight is model.encoder.weight,
            "train_losses": train_losses,
            "val_ppl": val_ppls,
            "lrs": lrs,
            "test_loss": test_loss,
            "test_ppl": math.exp(test_loss),
            "generated": " ".join(words),
            "parameter_norms": [p.norm().item() for p in model.parameters()],
            "decoder.bias[:8]": model.decoder.bias[:8].tolist(),
        }

    rng = np.random.default_rng(0)
    return {
        "ntokens": ntokens,
        "batches": [list(train_data.shape), list(val_data.shape), list(test_data.shape)],
        "lstm": train_and_evaluate("LSTM", rng),
        "gru": train_and_evaluate("GRU", rng),
    }
