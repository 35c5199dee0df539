// text/bpe_corpus.cpp: the text the random-model tokenizer is trained on (train_bpe.h). Written for this purpose:
// English prose, C++ and Python code, JSON, shell, numbers and Chinese / Japanese text, so that a tokenizer trained
// on it has merges for common words, indentation, operators and CJK characters. Changing it changes the ranks of
// every random-model tokenizer with more than 256 base tokens.
#include "text/train_bpe.h"

namespace kimi::text {

namespace {
constexpr char kText[] = R"corpus(The quick brown fox jumps over the lazy dog. The dog does not mind; it has seen the fox before.
A language model reads text as tokens. Each token is a short piece of a word, a whole word, a number or a mark
of punctuation. The tokenizer turns the text into token ids, the model predicts the next id, and the tokenizer
turns the ids back into text. When the model is small and its weights are random, the text it writes is random
too, but every step of the pipeline is the same as for a real model: the prompt is encoded, the prefill fills
the cache, and each decode step appends one token to the sequence.

Kimi Linear mixes two kinds of attention. Most layers use Kimi Delta Attention, a linear attention whose state
is a fixed-size matrix per head; every few layers use multi-head latent attention, which keeps a compressed
cache of keys and values for the whole context. The state of the linear layers does not grow with the length
of the sequence, so long contexts cost less memory than with full attention in every layer.

There are three things to remember: the weights, the cache and the activations. The weights are read once per
step; the cache grows with the context; the activations are small for decoding and large for prefill. What we
measure is tokens per second, time to the first token, and the memory that the process holds at its peak.

Q: What is the capital of France?
A: The capital of France is Paris. It has been the capital for a long time, and it is also the largest city.
Q: How many days are there in a week?
A: There are seven days in a week: Monday, Tuesday, Wednesday, Thursday, Friday, Saturday and Sunday.
Q: Can you write a function that adds two numbers?
A: Yes. Here is one in Python and one in C++.

def add(a, b):
    """Return the sum of a and b."""
    return a + b


def mean(values):
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / len(values)


for i in range(10):
    print(f"{i}: {add(i, i * 2)}")

#include <cstdint>
#include <string>
#include <vector>

// Returns the sum of the values; an empty vector sums to zero.
int64_t sum(const std::vector<int64_t>& values) {
  int64_t total = 0;
  for (int64_t v : values) total += v;
  return total;
}

class Tokenizer {
 public:
  explicit Tokenizer(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

int main(int argc, char** argv) {
  std::vector<int64_t> values = {1, 2, 3, 4, 5};
  if (argc > 1) values.push_back(std::stoll(argv[1]));
  return sum(values) == 15 ? 0 : 1;
}

{"model": "kimi-linear", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16, "stream": true}
{"id": "cmpl-1", "object": "text_completion", "choices": [{"index": 0, "text": "Hello, world.", "finish_reason": "stop"}]}
{"usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}}

$ cmake --preset release && cmake --build --preset release --target kimi
$ ./build/release/kimi generate /tmp/model --text "Once upon a time" --max-tokens 16
$ git log --oneline | head -5

Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 42 100 128 256 512 1024 2048 4096 8192 65536 3.14159 2.71828 -1 1e-5
Dates and times: 2024-01-01, 12:30:45, version 1.2.3, 64 GiB, 139 GB/s, 4.8 TB/s, 50%, $19.99, #7, x86_64.

Once upon a time there was a little robot who lived in a library. Every night it read one book, and every
morning it told the children what the book was about. "Why do you read at night?" they asked. "Because the
library is quiet," said the robot, "and because the books are waiting." The children laughed, and the robot
laughed with them, although it was not sure it knew how.

机器学习是人工智能的一个分支。语言模型通过学习大量文本来预测下一个词。
今天天气很好，我们去公园散步吧。北京是中国的首都，上海是中国最大的城市。
我们的模型很小，权重是随机的，所以它写出的文字也是随机的。但是每一步都和真正的模型一样。
注意力机制让模型在生成每一个词的时候都能看到前面所有的词。线性注意力的状态大小是固定的。
中文、English 和代码可以混在一起：函数 add(a, b) 返回 a + b 的和。
今日はいい天気ですね。私は毎朝コーヒーを飲みます。東京は日本の首都です。
トークナイザーはテキストをトークンに分けます。ひらがな、カタカナ、漢字があります。
한국어도 조금 있습니다. 안녕하세요, 반갑습니다.

The end of the text is near. Thank you for reading, and have a good day!
)corpus";
}  // namespace

const std::string_view kBpeCorpus(kText, sizeof(kText) - 1);

}  // namespace kimi::text
