#include <iostream>

int main() {
  std::cout << "syncopate\n";
  return 0;
}
